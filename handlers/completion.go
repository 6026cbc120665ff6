package handlers

import (
	"context"
	"errors"

	"github.com/labstack/echo/v4"

	"appkb/gen"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/chat"
	"appkb/internal/run/flows"
)

// createCompletionMessage serves POST /completion-messages; like chat
// messages, `response_mode` alone picks blocking (the default) or
// streaming.
func (s *Server) createCompletionMessage(c echo.Context) error {
	return startRun(s, c, s.flows.Completion, func(body *gen.CompletionRequest) flows.Request {
		return flows.Request{Request: chat.Request{
			User:      body.User,
			Query:     valueOf(body.Query),
			Inputs:    body.Inputs,
			Files:     fileRefs(body.Files),
			Streaming: body.ResponseMode != nil && *body.ResponseMode == gen.CompletionRequestResponseModeStreaming,
		}}
	})
}

// CreateCompletionMessage is the strict form of POST /completion-messages;
// the router sends the operation to createCompletionMessage instead.
func (s *Server) CreateCompletionMessage(context.Context, gen.CreateCompletionMessageRequestObject) (gen.CreateCompletionMessageResponseObject, error) {
	return nil, apperr.Internal(errors.New("POST /completion-messages is served by the raw handler"))
}

// StopGenerate serves POST /completion-messages/{task_id}/stop.
func (s *Server) StopGenerate(ctx context.Context, req gen.StopGenerateRequestObject) (gen.StopGenerateResponseObject, error) {
	if err := s.stopTask(ctx, s.flows.StopCompletion, (*stopBody)(req.Body), req.TaskId); err != nil {
		return nil, err
	}
	return gen.StopGenerate200JSONResponse{Result: "success"}, nil
}
