package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// CreateCompletionMessage serves POST /completion-messages.
func (s *Server) CreateCompletionMessage(ctx context.Context, req gen.CreateCompletionMessageRequestObject) (gen.CreateCompletionMessageResponseObject, error) {
	return nil, apperr.NotImplemented("POST /completion-messages")
}

// StopGenerate serves POST /completion-messages/{task_id}/stop.
func (s *Server) StopGenerate(ctx context.Context, req gen.StopGenerateRequestObject) (gen.StopGenerateResponseObject, error) {
	return nil, apperr.NotImplemented("POST /completion-messages/{task_id}/stop")
}
