package handlers

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/apperr"
	"appkb/flows"
)

// panicky fails to encode.
type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("cannot encode") }

// TestPump checks the one stream writer: headers go out with the first
// frame, an error before any frame is an ordinary error, an error or a
// producer panic after frames becomes the error frame, and a frame that
// cannot be written ends the stream without bringing the server down.
func TestPump(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	errorEvent := func(err error) any { return map[string]any{"event": "error", "code": apperr.From(err).Code} }
	hello := flows.Event{Name: "message", Payload: map[string]any{"event": "message", "answer": "hi"}}
	tests := []struct {
		name       string
		produce    func(ctx context.Context, emit func(flows.Event) error) (*flows.Result, error)
		wantErr    string // code of the error pump returns
		wantStream bool
		wantBody   []string
	}{
		{"refused before any frame", func(context.Context, func(flows.Event) error) (*flows.Result, error) {
			return nil, apperr.InvalidParam("bad inputs")
		}, apperr.CodeInvalidParam, false, nil},
		{"frames then the end", func(_ context.Context, emit func(flows.Event) error) (*flows.Result, error) {
			_ = emit(hello)
			return &flows.Result{}, nil
		}, "", true, []string{`data: {"answer":"hi","event":"message"}`}},
		{"failure after a frame", func(_ context.Context, emit func(flows.Event) error) (*flows.Result, error) {
			_ = emit(hello)
			return nil, apperr.InvalidParam("late")
		}, "", true, []string{`"answer":"hi"`, `data: {"code":"invalid_param","event":"error"}`}},
		{"producer panics after a frame", func(_ context.Context, emit func(flows.Event) error) (*flows.Result, error) {
			_ = emit(hello)
			panic("boom")
		}, "", true, []string{`"answer":"hi"`, `"code":"internal_server_error"`}},
		{"a frame that cannot be encoded", func(_ context.Context, emit func(flows.Event) error) (*flows.Result, error) {
			_ = emit(hello)
			_ = emit(flows.Event{Name: "bad", Payload: panicky{}})
			_ = emit(hello)
			return &flows.Result{}, nil
		}, "", true, []string{`"answer":"hi"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{log: log, pingInterval: time.Hour}
			e := echo.New()
			rec := httptest.NewRecorder()
			c := e.NewContext(httptest.NewRequest("POST", "/", nil), rec)
			run := flows.Produce(context.Background(), log, "task", errorEvent, tc.produce)
			err := s.pump(c, run, difyFraming)
			if tc.wantErr != "" {
				if !apperr.Is(err, tc.wantErr) {
					t.Fatalf("pump returned %v, want %s", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("pump returned %v", err)
			}
			isStream := rec.Header().Get("Content-Type") == "text/event-stream"
			if isStream != tc.wantStream {
				t.Fatalf("stream headers %v, want %v (%q)", isStream, tc.wantStream, rec.Header())
			}
			body := rec.Body.String()
			for _, want := range tc.wantBody {
				if !strings.Contains(body, want) {
					t.Errorf("body %q lacks %q", body, want)
				}
			}
			// The producer has ended: its events are closed.
			if _, open := <-run.Events(); open {
				t.Error("events still open after pump returned")
			}
		})
	}
}
