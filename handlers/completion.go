package handlers

import (
	"context"
	"errors"

	"github.com/labstack/echo/v4"

	"appkb/gen"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/flows"
)

// createCompletionMessage serves POST /completion-messages; like chat
// messages, `response_mode` alone picks blocking (the default) or
// streaming.
func (s *Server) createCompletionMessage(c echo.Context) error {
	ctx := c.Request().Context()
	p, err := principalFrom(ctx)
	if err != nil {
		return err
	}
	var body gen.CompletionRequest
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	streaming := body.ResponseMode != nil && *body.ResponseMode == gen.CompletionRequestResponseModeStreaming
	run, err := s.flows.Completion(ctx, flows.Request{
		AppID:     p.AppID,
		User:      body.User,
		Query:     valueOf(body.Query),
		Inputs:    body.Inputs,
		Files:     fileRefs(body.Files),
		Streaming: streaming,
	})
	if err != nil {
		return err
	}
	return s.answer(c, run, streaming)
}

// CreateCompletionMessage is the strict form of POST /completion-messages;
// the router sends the operation to createCompletionMessage instead.
func (s *Server) CreateCompletionMessage(context.Context, gen.CreateCompletionMessageRequestObject) (gen.CreateCompletionMessageResponseObject, error) {
	return nil, apperr.Internal(errors.New("POST /completion-messages is served by the raw handler"))
}

// StopGenerate serves POST /completion-messages/{task_id}/stop.
func (s *Server) StopGenerate(ctx context.Context, req gen.StopGenerateRequestObject) (gen.StopGenerateResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	user := ""
	if req.Body != nil {
		user = req.Body.User
	}
	if err := s.flows.StopCompletion(ctx, p.AppID, user, req.TaskId); err != nil {
		return nil, err
	}
	return gen.StopGenerate200JSONResponse{Result: "success"}, nil
}
