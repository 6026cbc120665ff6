package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// PostChatMessageFeedback serves POST /messages/{message_id}/feedbacks.
func (s *Server) PostChatMessageFeedback(ctx context.Context, req gen.PostChatMessageFeedbackRequestObject) (gen.PostChatMessageFeedbackResponseObject, error) {
	return nil, apperr.NotImplemented("POST /messages/{message_id}/feedbacks")
}

// GetChatAppFeedbacks serves GET /app/feedbacks.
func (s *Server) GetChatAppFeedbacks(ctx context.Context, req gen.GetChatAppFeedbacksRequestObject) (gen.GetChatAppFeedbacksResponseObject, error) {
	return nil, apperr.NotImplemented("GET /app/feedbacks")
}
