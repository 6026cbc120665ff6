// Package openai serves the OpenAI-compatible operations of the Service
// API: POST /chat/completions, GET /models and GET /models/{model}. The
// mapping between OpenAI's format and a turn of the key's app is
// oaicompat's; this package reads the request, runs the turn through
// flows (runner) and writes the answer, blocking or as a stream.
//
// The handlers package embeds an Endpoint in its Server, so that the
// Endpoint's methods serve these operations of gen.StrictServerInterface,
// and routes the raw POST /chat/completions to ServeChatCompletion.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/gen"
	"appkb/handlers/oaicompat"
	"appkb/handlers/sse"
	"appkb/handlers/validation"
	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/flows"
)

// Config is what an Endpoint serves from.
type Config struct {
	Apps  *apps.Store
	Flows *flows.Service
	Log   *slog.Logger
	// Ping is the keep-alive period of a quiet stream.
	Ping time.Duration
	// MaxText bounds the text of each message of a chat completion (0: no
	// limit).
	MaxText int
}

// Endpoint serves the OpenAI-compatible operations.
type Endpoint struct {
	runner  runner
	log     *slog.Logger
	stream  sse.Streamer
	maxText int
}

// New makes the endpoint.
func New(cfg Config) *Endpoint {
	return &Endpoint{runner: runner{apps: cfg.Apps, flows: cfg.Flows}, log: cfg.Log,
		stream: sse.Streamer{Ping: cfg.Ping, Log: cfg.Log}, maxText: cfg.MaxText}
}

// CreateOpenAIChatCompletion is the strict form of POST /chat/completions;
// the router sends the operation to ServeChatCompletion instead.
func (e *Endpoint) CreateOpenAIChatCompletion(context.Context, gen.CreateOpenAIChatCompletionRequestObject) (gen.CreateOpenAIChatCompletionResponseObject, error) {
	return nil, apperr.Internal(errors.New("POST /chat/completions is served by the raw handler"))
}

// ListOpenAIModels serves GET /models: the key's app as the one model.
func (e *Endpoint) ListOpenAIModels(ctx context.Context, _ gen.ListOpenAIModelsRequestObject) (gen.ListOpenAIModelsResponseObject, error) {
	app, err := e.app(ctx)
	if err != nil {
		return nil, err
	}
	return rawJSON[gen.ListOpenAIModels200JSONResponse](oaicompat.Models(app))
}

// GetOpenAIModel serves GET /models/{model}, found by the app's id or name.
func (e *Endpoint) GetOpenAIModel(ctx context.Context, req gen.GetOpenAIModelRequestObject) (gen.GetOpenAIModelResponseObject, error) {
	app, err := e.app(ctx)
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

// app describes the app of the request's key.
func (e *Endpoint) app(ctx context.Context) (*oaicompat.App, error) {
	p, err := validation.PrincipalFrom(ctx)
	if err != nil {
		return nil, err
	}
	return e.runner.App(ctx, p.AppID)
}

// ServeChatCompletion serves POST /chat/completions: it maps the request
// onto a turn of the key's app and answers with one chat.completion, or
// with chunks when it streams.
func (e *Endpoint) ServeChatCompletion(c echo.Context) error {
	ctx := c.Request().Context()
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return apperr.InvalidParam("request body could not be read")
	}
	req, err := oaicompat.DecodeRequest(body)
	if err != nil {
		return err
	}
	if err := req.CheckText(e.maxText); err != nil {
		return err
	}
	app, err := e.app(ctx)
	if err != nil {
		return err
	}
	turn, err := oaicompat.BuildTurn(req, app)
	if err != nil {
		return err
	}
	if !req.Stream {
		a, err := e.runner.Run(ctx, turn, nil)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, oaicompat.NewCompletion(req.Model, a.Start).Blocking(a))
	}
	return e.streamChatCompletion(c, e.runner, req, turn)
}

// streamChatCompletion streams the turn in OpenAI's framing: a chunk with
// the role once the turn has begun, one chunk per piece of text, a chunk
// with the finish reason, the usage chunk when asked for, then
// `data: [DONE]`. The turn runs as a flows run, so the one stream pump
// writes it: a turn refused before it began gets a plain JSON error, a
// failure afterwards is a data frame holding an OpenAI error object and
// the stream ends without [DONE]; a comment line keeps a quiet stream
// alive, and a client that goes away cancels the turn.
func (e *Endpoint) streamChatCompletion(c echo.Context, runner oaicompat.Runner, req *oaicompat.Request, turn *oaicompat.Turn) error {
	errorEvent := func(err error) any {
		_, body := oaicompat.ToError(err)
		return body
	}
	run := flows.Produce(c.Request().Context(), e.log, "", errorEvent,
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
	return e.stream.Pump(c, run, sse.OpenAI)
}
