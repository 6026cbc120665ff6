package handlers

import (
	"context"

	"appkb/gen"
	"appkb/handlers/wire"
)

// PostChatMessageFeedback serves POST /messages/{message_id}/feedbacks: the
// caller rates an answer it received, or withdraws its rating.
func (s *Server) PostChatMessageFeedback(ctx context.Context, req gen.PostChatMessageFeedbackRequestObject) (gen.PostChatMessageFeedbackResponseObject, error) {
	app, err := s.currentApp(ctx)
	if err != nil {
		return nil, err
	}
	var body gen.MessageFeedbackRequest
	if req.Body != nil {
		body = *req.Body
	}
	var rating string
	if body.Rating != nil {
		rating = string(*body.Rating)
	}
	err = s.convs.SetFeedback(ctx, app, body.User, req.MessageId, rating, body.Content)
	if err != nil {
		return nil, err
	}
	return gen.PostChatMessageFeedback200JSONResponse{Result: "success"}, nil
}

// GetChatAppFeedbacks serves GET /app/feedbacks: every rating given on the
// app's messages, newest first, one page at a time.
func (s *Server) GetChatAppFeedbacks(ctx context.Context, req gen.GetChatAppFeedbacksRequestObject) (gen.GetChatAppFeedbacksResponseObject, error) {
	app, err := s.currentApp(ctx)
	if err != nil {
		return nil, err
	}
	items, err := s.convs.FeedbackPage(ctx, app, wire.ValueOf(req.Params.Page), wire.ValueOf(req.Params.Limit))
	if err != nil {
		return nil, err
	}
	out := gen.AppFeedbacksResponse{Data: make([]gen.FeedbackItem, len(items))}
	for i, f := range items {
		out.Data[i] = gen.FeedbackItem{
			Id:             f.ID,
			AppId:          f.AppID,
			ConversationId: f.ConversationID, // nil for text generator messages
			MessageId:      f.MessageID,
			Rating:         f.Rating,
			Content:        f.Content,
			FromSource:     f.FromSource,
			FromEndUserId:  f.FromEndUserID,
			CreatedAt:      f.CreatedAt,
			UpdatedAt:      f.UpdatedAt,
		}
	}
	return gen.GetChatAppFeedbacks200JSONResponse(out), nil
}
