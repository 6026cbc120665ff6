package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// GetConversationsList serves GET /conversations.
func (s *Server) GetConversationsList(ctx context.Context, req gen.GetConversationsListRequestObject) (gen.GetConversationsListResponseObject, error) {
	return nil, apperr.NotImplemented("GET /conversations")
}

// GetConversationHistory serves GET /messages.
func (s *Server) GetConversationHistory(ctx context.Context, req gen.GetConversationHistoryRequestObject) (gen.GetConversationHistoryResponseObject, error) {
	return nil, apperr.NotImplemented("GET /messages")
}

// GetConversationVariables serves GET /conversations/{conversation_id}/variables.
func (s *Server) GetConversationVariables(ctx context.Context, req gen.GetConversationVariablesRequestObject) (gen.GetConversationVariablesResponseObject, error) {
	return nil, apperr.NotImplemented("GET /conversations/{conversation_id}/variables")
}

// RenameConversation serves POST /conversations/{conversation_id}/name.
func (s *Server) RenameConversation(ctx context.Context, req gen.RenameConversationRequestObject) (gen.RenameConversationResponseObject, error) {
	return nil, apperr.NotImplemented("POST /conversations/{conversation_id}/name")
}

// UpdateChatConversationVariable serves PUT /conversations/{conversation_id}/variables/{variable_id}.
func (s *Server) UpdateChatConversationVariable(ctx context.Context, req gen.UpdateChatConversationVariableRequestObject) (gen.UpdateChatConversationVariableResponseObject, error) {
	return nil, apperr.NotImplemented("PUT /conversations/{conversation_id}/variables/{variable_id}")
}

// DeleteConversation serves DELETE /conversations/{conversation_id}.
func (s *Server) DeleteConversation(ctx context.Context, req gen.DeleteConversationRequestObject) (gen.DeleteConversationResponseObject, error) {
	return nil, apperr.NotImplemented("DELETE /conversations/{conversation_id}")
}
