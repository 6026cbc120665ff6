package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/apperr"
	"appkb/gen"
	"appkb/oaicompat"
)

// The OpenAI-compatible operations: POST /chat/completions, GET /models
// and GET /models/{model}. The mapping between OpenAI's format and the
// app's turn is oaicompat's; the turn runs through openaiRunner.

// openAIPath reports whether a request path belongs to the
// OpenAI-compatible operations, whose errors take OpenAI's shape.
func openAIPath(path string) bool {
	rest, ok := strings.CutPrefix(path, basePath)
	return ok && oaicompat.Serves(rest)
}

// CreateOpenAIChatCompletion serves POST /chat/completions, blocking or
// streaming.
func (a api) CreateOpenAIChatCompletion(c echo.Context) error { return a.srv.createChatCompletion(c) }

// CreateOpenAIChatCompletion is the strict form of POST /chat/completions;
// the router sends the operation to createChatCompletion instead.
func (s *Server) CreateOpenAIChatCompletion(context.Context, gen.CreateOpenAIChatCompletionRequestObject) (gen.CreateOpenAIChatCompletionResponseObject, error) {
	return nil, apperr.Internal(errors.New("POST /chat/completions is served by the raw handler"))
}

// ListOpenAIModels serves GET /models: the key's app as the one model.
func (s *Server) ListOpenAIModels(ctx context.Context, _ gen.ListOpenAIModelsRequestObject) (gen.ListOpenAIModelsResponseObject, error) {
	app, err := s.openaiApp(ctx)
	if err != nil {
		return nil, err
	}
	return rawJSON[gen.ListOpenAIModels200JSONResponse](oaicompat.Models(app))
}

// GetOpenAIModel serves GET /models/{model}, found by the app's id or name.
func (s *Server) GetOpenAIModel(ctx context.Context, req gen.GetOpenAIModelRequestObject) (gen.GetOpenAIModelResponseObject, error) {
	app, err := s.openaiApp(ctx)
	if err != nil {
		return nil, err
	}
	m, err := oaicompat.FindModel(app, req.Model)
	if err != nil {
		return nil, err
	}
	return rawJSON[gen.GetOpenAIModel200JSONResponse](m)
}

// rawJSON converts one of oaicompat's wire values to the generated
// response type of the same shape.
func rawJSON[T any](v any) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return out, apperr.Internal(fmt.Errorf("openai: convert %T: %w", v, err))
	}
	return out, nil
}

func (s *Server) openaiApp(ctx context.Context) (*oaicompat.App, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	return openaiRunner{s}.App(ctx, p.AppID)
}

// createChatCompletion maps the request onto a turn of the key's app and
// answers with one chat.completion, or with chunks when it streams.
func (s *Server) createChatCompletion(c echo.Context) error {
	ctx := c.Request().Context()
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return apperr.InvalidParam("request body could not be read")
	}
	req, err := oaicompat.DecodeRequest(body)
	if err != nil {
		return err
	}
	app, err := s.openaiApp(ctx)
	if err != nil {
		return err
	}
	turn, err := oaicompat.BuildTurn(req, app)
	if err != nil {
		return err
	}
	runner := openaiRunner{s}
	if !req.Stream {
		a, err := runner.Run(ctx, turn, nil)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, oaicompat.NewCompletion(req.Model, a.Start).Blocking(a))
	}
	return s.streamChatCompletion(c, runner, req, turn)
}

// streamChatCompletion runs the turn in its own goroutine and writes
// OpenAI's stream: a chunk with the role once the turn has begun, one
// chunk per piece of text, a chunk with the finish reason, the usage chunk
// when asked for, then `data: [DONE]`. A turn refused before it began
// gets a plain JSON error; a failure afterwards is sent as a data frame
// holding an OpenAI error object, and the stream ends without [DONE]. A
// comment line keeps a quiet stream alive. When the client goes away the
// turn is cancelled; its events are drained to the end.
func (s *Server) streamChatCompletion(c echo.Context, runner oaicompat.Runner, req *oaicompat.Request, turn *oaicompat.Turn) error {
	ctx, cancel := context.WithCancelCause(c.Request().Context())
	defer cancel(nil)
	events := make(chan oaicompat.Event, 32)
	var (
		answer *oaicompat.Answer
		runErr error
	)
	go func() {
		defer close(events)
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("openai: chat completion panicked", "app_id", turn.AppID, "panic", p)
				runErr = apperr.Internal(fmt.Errorf("chat completion panicked: %v", p))
			}
		}()
		answer, runErr = runner.Run(ctx, turn, func(ev oaicompat.Event) error {
			select {
			case events <- ev:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	}()

	var (
		w      *sseWriter // OpenAI framing: data frames, comment keep-alives, [DONE]
		comp   oaicompat.Completion
		broken bool
	)
	send := func(v any) {
		if broken || w == nil {
			return
		}
		if err := w.event(v); err != nil {
			broken = true
			cancel(err)
		}
	}
	ping := time.NewTicker(s.pingInterval)
	defer ping.Stop()
	for open := true; open; {
		select {
		case ev, ok := <-events:
			if !ok {
				open = false
				break
			}
			switch {
			case ev.Start != nil && w == nil:
				comp = oaicompat.NewCompletion(req.Model, *ev.Start)
				w = startSSE(c)
				send(comp.RoleChunk())
			case ev.Text != "":
				send(comp.TextChunk(ev.Text))
			}
			ping.Reset(s.pingInterval)
		case <-ping.C:
			if w != nil && !broken {
				if err := w.write([]byte(": keep-alive\n\n")); err != nil {
					broken = true
					cancel(err)
				}
			}
		}
	}
	if runErr != nil {
		if w == nil {
			return runErr
		}
		if !broken {
			_, body := oaicompat.ToError(runErr)
			send(body)
		}
		return nil
	}
	if w == nil {
		// A runner that never reported its start: open the stream now.
		comp = oaicompat.NewCompletion(req.Model, answer.Start)
		w = startSSE(c)
		send(comp.RoleChunk())
	}
	send(comp.FinishChunk(answer))
	if req.IncludeUsage() {
		send(comp.UsageChunk(answer))
	}
	if !broken {
		if err := w.write([]byte("data: [DONE]\n\n")); err != nil {
			cancel(err)
		}
	}
	return nil
}
