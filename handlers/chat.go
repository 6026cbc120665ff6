package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// SendChatMessage serves POST /chat-messages.
func (s *Server) SendChatMessage(ctx context.Context, req gen.SendChatMessageRequestObject) (gen.SendChatMessageResponseObject, error) {
	return nil, apperr.NotImplemented("POST /chat-messages")
}

// StopChatMessageGeneration serves POST /chat-messages/{task_id}/stop.
func (s *Server) StopChatMessageGeneration(ctx context.Context, req gen.StopChatMessageGenerationRequestObject) (gen.StopChatMessageGenerationResponseObject, error) {
	return nil, apperr.NotImplemented("POST /chat-messages/{task_id}/stop")
}

// GetSuggestedQuestions serves GET /messages/{message_id}/suggested.
func (s *Server) GetSuggestedQuestions(ctx context.Context, req gen.GetSuggestedQuestionsRequestObject) (gen.GetSuggestedQuestionsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /messages/{message_id}/suggested")
}
