package handlers

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/labstack/echo/v4"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/chat"
	"appkb/internal/run/flows"
)

// sendChatMessage serves POST /chat-messages for chat, agent and chatflow
// apps. `response_mode` alone picks the answer's form (streaming, or
// blocking when absent); the Accept header plays no part.
func (s *Server) sendChatMessage(c echo.Context) error {
	return startRun(s, c, s.flows.Chat, func(body *gen.ChatRequest) flows.Request {
		return flows.Request{WorkflowID: wire.ValueOf(body.WorkflowId), Request: chat.Request{
			User:             body.User,
			Query:            body.Query,
			Inputs:           body.Inputs,
			ConversationID:   wire.ValueOf(body.ConversationId),
			Files:            fileRefs(body.Files),
			AutoGenerateName: body.AutoGenerateName == nil || *body.AutoGenerateName,
			Streaming:        body.ResponseMode != nil && *body.ResponseMode == gen.ChatRequestResponseModeStreaming,
		}}
	})
}

// SendChatMessage is the strict form of POST /chat-messages. The operation
// is routed to sendChatMessage instead (see api in server.go), so this is
// never reached through the router.
func (s *Server) SendChatMessage(context.Context, gen.SendChatMessageRequestObject) (gen.SendChatMessageResponseObject, error) {
	return nil, apperr.Internal(errors.New("POST /chat-messages is served by the raw handler"))
}

// createCompletionMessage serves POST /completion-messages; like chat
// messages, `response_mode` alone picks blocking (the default) or
// streaming.
func (s *Server) createCompletionMessage(c echo.Context) error {
	return startRun(s, c, s.flows.Completion, func(body *gen.CompletionRequest) flows.Request {
		return flows.Request{Request: chat.Request{
			User:      body.User,
			Query:     wire.ValueOf(body.Query),
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

// startRun is the common part of the operations that start a run: the
// key's principal, then the body decoded as B, then start with the
// request req made of it for the key's app, then the answer, streaming
// when the request asks for it.
func startRun[B any](s *Server, c echo.Context, start func(context.Context, flows.Request) (*flows.Run, error),
	req func(body *B) flows.Request) error {
	ctx := c.Request().Context()
	p, err := principalFrom(ctx)
	if err != nil {
		return err
	}
	var body B
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	r := req(&body)
	r.AppID = p.AppID
	run, err := start(ctx, r)
	if err != nil {
		return err
	}
	return s.answer(c, run, r.Streaming)
}

// StopChatMessageGeneration serves POST /chat-messages/{task_id}/stop.
func (s *Server) StopChatMessageGeneration(ctx context.Context, req gen.StopChatMessageGenerationRequestObject) (gen.StopChatMessageGenerationResponseObject, error) {
	if err := s.stopTask(ctx, s.flows.StopChat, (*stopBody)(req.Body), req.TaskId); err != nil {
		return nil, err
	}
	return gen.StopChatMessageGeneration200JSONResponse{Result: "success"}, nil
}

// StopGenerate serves POST /completion-messages/{task_id}/stop.
func (s *Server) StopGenerate(ctx context.Context, req gen.StopGenerateRequestObject) (gen.StopGenerateResponseObject, error) {
	if err := s.stopTask(ctx, s.flows.StopCompletion, (*stopBody)(req.Body), req.TaskId); err != nil {
		return nil, err
	}
	return gen.StopGenerate200JSONResponse{Result: "success"}, nil
}

// stopBody is the optional body of the chat and completion stop
// operations, whose generated types differ in name only.
type stopBody = struct {
	User string `json:"user"`
}

// stopTask is the common part of the chat and completion stop operations:
// it stops taskID of the key's app on behalf of the body's user (none
// without a body).
func (s *Server) stopTask(ctx context.Context, stop func(ctx context.Context, appID, user, taskID string) error,
	body *stopBody, taskID string) error {
	p, err := principalFrom(ctx)
	if err != nil {
		return err
	}
	user := ""
	if body != nil {
		user = body.User
	}
	return stop(ctx, p.AppID, user, taskID)
}

// GetSuggestedQuestions serves GET /messages/{message_id}/suggested.
func (s *Server) GetSuggestedQuestions(ctx context.Context, req gen.GetSuggestedQuestionsRequestObject) (gen.GetSuggestedQuestionsResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	questions, err := s.chat.SuggestedQuestions(ctx, p.AppID, req.Params.User, req.MessageId)
	if err != nil {
		return nil, err
	}
	return gen.GetSuggestedQuestions200JSONResponse{Result: "success", Data: questions}, nil
}

// decodeBody reads a JSON request body that the validator has already
// checked against openapi.yaml.
func decodeBody(c echo.Context, v any) error {
	if err := json.NewDecoder(c.Request().Body).Decode(v); err != nil {
		return apperr.InvalidParam("request body is not valid JSON: %v", err)
	}
	return nil
}

// fileRefs converts the files of a request.
func fileRefs(files *[]gen.InputFileObject) []chat.FileRef {
	if files == nil {
		return nil
	}
	out := make([]chat.FileRef, 0, len(*files))
	for _, f := range *files {
		out = append(out, chat.FileRef{
			Type:           string(f.Type),
			TransferMethod: string(f.TransferMethod),
			URL:            wire.ValueOf(f.Url),
			UploadFileID:   wire.ValueOf(f.UploadFileId),
		})
	}
	return out
}
