package handlers

import (
	"context"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/conversation/conversations"
)

// GetConversationsList serves GET /conversations: one page of the caller's
// conversations.
func (s *Server) GetConversationsList(ctx context.Context, req gen.GetConversationsListRequestObject) (gen.GetConversationsListResponseObject, error) {
	app, err := s.currentApp(ctx)
	if err != nil {
		return nil, err
	}
	p := req.Params
	query := conversations.ListQuery{LastID: wire.ValueOf(p.LastId), Limit: wire.ValueOf(p.Limit)}
	if p.SortBy != nil {
		query.SortBy = string(*p.SortBy)
	}
	page, err := s.convs.List(ctx, app, wire.ValueOf(p.User), query)
	if err != nil {
		return nil, err
	}
	out := gen.ConversationsListResponse{Limit: page.Limit, HasMore: page.HasMore, Data: make([]gen.ConversationListItem, len(page.Data))}
	for i := range page.Data {
		out.Data[i] = wire.ConversationItem(&page.Data[i])
	}
	return gen.GetConversationsList200JSONResponse(out), nil
}

// GetConversationHistory serves GET /messages: one page of a conversation's
// messages, oldest first within the page.
func (s *Server) GetConversationHistory(ctx context.Context, req gen.GetConversationHistoryRequestObject) (gen.GetConversationHistoryResponseObject, error) {
	app, err := s.currentApp(ctx)
	if err != nil {
		return nil, err
	}
	p := req.Params
	page, err := s.convs.History(ctx, app, wire.ValueOf(p.User), p.ConversationId,
		conversations.HistoryQuery{FirstID: wire.ValueOf(p.FirstId), Limit: wire.ValueOf(p.Limit)})
	if err != nil {
		return nil, err
	}
	out := gen.ConversationHistoryResponse{Limit: page.Limit, HasMore: page.HasMore, Data: make([]gen.ConversationMessageItem, len(page.Data))}
	for i := range page.Data {
		conversations.SignLocalFiles(page.Data[i].Files, s.previews)
		out.Data[i] = wire.HistoryItem(&page.Data[i])
	}
	return gen.GetConversationHistory200JSONResponse(out), nil
}

// GetConversationVariables serves GET /conversations/{conversation_id}/variables.
func (s *Server) GetConversationVariables(ctx context.Context, req gen.GetConversationVariablesRequestObject) (gen.GetConversationVariablesResponseObject, error) {
	app, def, err := s.currentDefinition(ctx)
	if err != nil {
		return nil, err
	}
	p := req.Params
	page, err := s.convs.Variables(ctx, app, def, wire.ValueOf(p.User), req.ConversationId,
		conversations.VariableQuery{LastID: wire.ValueOf(p.LastId), Limit: wire.ValueOf(p.Limit), Name: wire.ValueOf(p.VariableName)})
	if err != nil {
		return nil, err
	}
	out := gen.ConversationVariablesResponse{Limit: page.Limit, HasMore: page.HasMore, Data: make([]gen.ConversationVariableItem, len(page.Data))}
	for i := range page.Data {
		out.Data[i] = wire.VariableItem(&page.Data[i])
	}
	return gen.GetConversationVariables200JSONResponse(out), nil
}

// RenameConversation serves POST /conversations/{conversation_id}/name.
func (s *Server) RenameConversation(ctx context.Context, req gen.RenameConversationRequestObject) (gen.RenameConversationResponseObject, error) {
	app, err := s.currentApp(ctx)
	if err != nil {
		return nil, err
	}
	var body gen.ConversationRenameRequest
	if req.Body != nil {
		body = *req.Body
	}
	conv, err := s.convs.RenameConversation(ctx, app, wire.ValueOf(body.User), req.ConversationId,
		conversations.Rename{Name: wire.ValueOf(body.Name), AutoGenerate: wire.ValueOf(body.AutoGenerate)})
	if err != nil {
		return nil, err
	}
	return gen.RenameConversation200JSONResponse(wire.ConversationItem(conv)), nil
}

// UpdateChatConversationVariable serves PUT /conversations/{conversation_id}/variables/{variable_id}.
func (s *Server) UpdateChatConversationVariable(ctx context.Context, req gen.UpdateChatConversationVariableRequestObject) (gen.UpdateChatConversationVariableResponseObject, error) {
	app, def, err := s.currentDefinition(ctx)
	if err != nil {
		return nil, err
	}
	var body gen.ConversationVariableUpdateRequest
	if req.Body != nil {
		body = *req.Body
	}
	v, err := s.convs.UpdateVariable(ctx, app, def, wire.ValueOf(body.User), req.ConversationId, req.VariableId, body.Value)
	if err != nil {
		return nil, err
	}
	return gen.UpdateChatConversationVariable200JSONResponse(wire.VariableItem(v)), nil
}

// DeleteConversation serves DELETE /conversations/{conversation_id}.
func (s *Server) DeleteConversation(ctx context.Context, req gen.DeleteConversationRequestObject) (gen.DeleteConversationResponseObject, error) {
	app, err := s.currentApp(ctx)
	if err != nil {
		return nil, err
	}
	var user string
	if req.Body != nil {
		user = wire.ValueOf(req.Body.User)
	}
	if err := s.convs.Delete(ctx, app, user, req.ConversationId); err != nil {
		return nil, err
	}
	return gen.DeleteConversation204Response{}, nil
}
