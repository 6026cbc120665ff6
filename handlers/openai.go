package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"appkb/gen"
	"appkb/handlers/oaicompat"
	"appkb/handlers/sse"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/flows"
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
	if err := req.CheckText(s.maxText); err != nil {
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

// streamChatCompletion streams the turn in OpenAI's framing: a chunk with
// the role once the turn has begun, one chunk per piece of text, a chunk
// with the finish reason, the usage chunk when asked for, then
// `data: [DONE]`. The turn runs as a flows run, so the one stream pump
// writes it: a turn refused before it began gets a plain JSON error, a
// failure afterwards is a data frame holding an OpenAI error object and
// the stream ends without [DONE]; a comment line keeps a quiet stream
// alive, and a client that goes away cancels the turn.
func (s *Server) streamChatCompletion(c echo.Context, runner oaicompat.Runner, req *oaicompat.Request, turn *oaicompat.Turn) error {
	errorEvent := func(err error) any {
		_, body := oaicompat.ToError(err)
		return body
	}
	run := flows.Produce(c.Request().Context(), s.log, "", errorEvent,
		func(ctx context.Context, emit func(flows.Event) error) (*flows.Result, error) {
			var comp oaicompat.Completion
			started := false
			chunk := func(v any) error { return emit(flows.Event{Payload: v}) }
			begin := func(start oaicompat.Start) error {
				comp = oaicompat.NewCompletion(req.Model, start)
				started = true
				return chunk(comp.RoleChunk())
			}
			answer, err := runner.Run(ctx, turn, func(ev oaicompat.Event) error {
				switch {
				case ev.Start != nil && !started:
					return begin(*ev.Start)
				case ev.Text != "":
					return chunk(comp.TextChunk(ev.Text))
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			if !started {
				// A runner that never reported its start: begin now.
				if err := begin(answer.Start); err != nil {
					return nil, err
				}
			}
			if err := chunk(comp.FinishChunk(answer)); err != nil {
				return nil, err
			}
			if req.IncludeUsage() {
				if err := chunk(comp.UsageChunk(answer)); err != nil {
					return nil, err
				}
			}
			return &flows.Result{}, nil
		})
	return s.pump(c, run, sse.OpenAI)
}
