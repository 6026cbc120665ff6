package sse

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/internal/platform/apperr"
	"appkb/internal/run/flows"
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
			s := &Streamer{Log: log, Ping: time.Hour}
			e := echo.New()
			rec := httptest.NewRecorder()
			c := e.NewContext(httptest.NewRequest("POST", "/", nil), rec)
			run := flows.Produce(context.Background(), log, "task", errorEvent, tc.produce)
			err := s.Pump(c, run, Dify)
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

// flushCounter is a response writer that counts flushes and tells each
// one on flushed.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes atomic.Int32
	flushed chan string // the body so far, at each flush
}

func (f *flushCounter) Flush() {
	f.flushes.Add(1)
	f.ResponseRecorder.Flush()
	select {
	case f.flushed <- f.Body.String():
	default:
	}
}

// TestPumpCoalescesBursts checks when frames are flushed: events that are
// all queued when the writer gets to them go out with one flush, while an
// event followed by nothing (a model still thinking) is flushed at once.
func TestPumpCoalescesBursts(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	errorEvent := func(err error) any { return map[string]any{"event": "error"} }
	msg := func(i int) flows.Event {
		return flows.Event{Name: "message", Payload: map[string]any{"event": "message", "answer": fmt.Sprint("part", i)}}
	}
	newPump := func() (*Streamer, echo.Context, *flushCounter) {
		rec := &flushCounter{ResponseRecorder: httptest.NewRecorder(), flushed: make(chan string, 64)}
		c := echo.New().NewContext(httptest.NewRequest("POST", "/", nil), rec)
		return &Streamer{Log: log, Ping: time.Hour}, c, rec
	}

	t.Run("a burst goes out with one flush", func(t *testing.T) {
		s, c, rec := newPump()
		queued, release := make(chan struct{}), make(chan struct{})
		run := flows.Produce(context.Background(), log, "task", errorEvent, func(_ context.Context, emit func(flows.Event) error) (*flows.Result, error) {
			for i := range 10 {
				_ = emit(msg(i))
			}
			close(queued)
			<-release
			return &flows.Result{}, nil
		})
		<-queued
		done := make(chan error, 1)
		go func() { done <- s.Pump(c, run, Dify) }()
		body := <-rec.flushed // the first flush carries the whole burst
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if !strings.Contains(body, fmt.Sprintf(`"answer":"part%d"`, i)) {
				t.Errorf("first flush lacks part%d: %q", i, body)
			}
		}
		if n := rec.flushes.Load(); n != 1 {
			t.Errorf("%d flushes for one burst, want 1", n)
		}
	})

	t.Run("a lone event is flushed at once", func(t *testing.T) {
		s, c, rec := newPump()
		run := flows.Produce(context.Background(), log, "task", errorEvent, func(_ context.Context, emit func(flows.Event) error) (*flows.Result, error) {
			for i := range 3 {
				_ = emit(msg(i))
				// The next part comes only once this one reached the client.
				select {
				case body := <-rec.flushed:
					if !strings.Contains(body, fmt.Sprintf("part%d", i)) {
						return nil, fmt.Errorf("flush %d lacks its event: %q", i, body)
					}
				case <-time.After(10 * time.Second):
					return nil, fmt.Errorf("event %d was held back", i)
				}
			}
			return &flows.Result{}, nil
		})
		if err := s.Pump(c, run, Dify); err != nil {
			t.Fatal(err)
		}
		if body := rec.Body.String(); strings.Contains(body, "error") || strings.Count(body, "data: ") != 3 {
			t.Errorf("body %q, want three message frames and no error", body)
		}
	})
}
