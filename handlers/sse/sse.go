// Package sse writes the event streams of the API (Server-Sent Events):
// Dify's framing for runs, OpenAI's for chat completions, with keep-alives,
// coalesced bursts and a write deadline per frame.
package sse

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/internal/run/flows"
)

// frameWriteTimeout bounds the write of one frame: a client that stops
// reading cannot hold a stream (and its run) open for ever.
const frameWriteTimeout = 30 * time.Second

// sseWriter writes a message stream the way Dify frames it: each event is
// one `data: {json}` line followed by a blank line, and keep-alives are a
// bare `event: ping` line followed by a blank line. A frame is flushed at
// once, under its own write deadline, unless the caller holds it because
// the next one is already waiting: frames that arrive together (a fast
// model's whole answer in one read) go out in one write instead of one
// system call each.
type sseWriter struct {
	res *echo.Response
	rc  *http.ResponseController
}

// startSSE sends the stream's headers.
func startSSE(c echo.Context) *sseWriter {
	res := c.Response()
	h := res.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("X-Accel-Buffering", "no")
	res.WriteHeader(http.StatusOK)
	return &sseWriter{res: res, rc: http.NewResponseController(res)}
}

// event writes one data frame, flushed unless hold.
func (w *sseWriter) event(v any, hold bool) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return err
	}
	frame := make([]byte, 0, len(payload)+8)
	frame = append(frame, "data: "...)
	frame = append(frame, payload...)
	frame = append(frame, "\n\n"...)
	return w.write(frame, hold)
}

// Framing is what tells the two event streams apart besides their data
// frames: Dify's keep-alive is an `event: ping` line, OpenAI's a comment,
// and OpenAI ends a stream that went well with `data: [DONE]`.
type Framing struct {
	ping []byte
	done []byte // written after the last event of a run that did not fail
}

// Dify and OpenAI are the two framings the API streams in.
var (
	Dify   = Framing{ping: []byte("event: ping\n\n")}
	OpenAI = Framing{ping: []byte(": keep-alive\n\n"), done: []byte("data: [DONE]\n\n")}
)

// Streamer pumps runs into event streams.
type Streamer struct {
	// Ping is the keep-alive period of a quiet stream.
	Ping time.Duration
	Log  *slog.Logger
}

// write sends one frame and flushes it, unless hold. The deadline is set
// per frame; writers that cannot set one (test recorders) go without.
func (w *sseWriter) write(frame []byte, hold bool) error {
	// Even a held frame may go out now, when it fills the buffer.
	_ = w.rc.SetWriteDeadline(time.Now().Add(frameWriteTimeout))
	if _, err := w.res.Write(frame); err != nil {
		return err
	}
	if hold {
		return nil
	}
	return w.rc.Flush()
}

// Pump is the one writer of event streams. It writes each event of run as
// one frame until the run closes its events. The headers go out with the
// first frame, so a run refused before it produced anything still answers
// with a plain JSON error. A ping goes out whenever the stream was quiet
// for the ping interval, until the answer is complete. A failed write (the
// client went away) cancels the run, and its events are still drained so
// that the producer ends.
// Once the events are closed, run.Err tells how the run ended: nil ends the
// stream; an error before any frame is returned as it is; an error after
// frames becomes the run's error event; a run that did not fail ends with
// the framing's done frame, if it has one. A panic while writing is logged
// and ends the stream.
func (s *Streamer) Pump(c echo.Context, run *flows.Run, f Framing) (err error) {
	var w *sseWriter
	defer func() {
		if p := recover(); p != nil {
			s.Log.Error("stream writer panicked", "task_id", run.TaskID, "panic", p, "stack", string(debug.Stack()))
			run.Cancel(errors.New("stream writer failed"))
			for range run.Events() {
			}
			if w == nil {
				err = fmt.Errorf("stream writer panicked: %v", p)
			}
		}
	}()
	ping := time.NewTicker(s.Ping)
	defer ping.Stop()
	broken, answered := false, false
	send := func(write func() error) {
		if broken {
			return
		}
		if w == nil {
			w = startSSE(c)
		}
		if err := write(); err != nil {
			broken = true
			run.Cancel(err)
		}
	}
	events := run.Events()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				err := run.Err()
				if err == nil {
					if f.done != nil {
						send(func() error { return w.write(f.done, false) })
					}
					return nil
				}
				if w == nil {
					return err
				}
				send(func() error { return w.event(run.ErrorEvent(err), false) })
				return nil
			}
			// When the next event is already queued, this frame waits
			// for it in the buffer; the last of a burst flushes them all.
			more := len(events) > 0
			send(func() error { return w.event(ev.Payload, more) })
			if ev.Name == "message_end" || ev.Name == "workflow_finished" {
				// The answer is complete; what may still come (read-aloud
				// audio, the end of the stream) needs no keep-alive, and
				// clients expect nothing but audio after message_end.
				// A stopped ticker sends nothing more (Go 1.23 timers).
				answered = true
				ping.Stop()
			} else if !answered {
				ping.Reset(s.Ping)
			}
		case <-ping.C:
			send(func() error { return w.write(f.ping, false) })
		}
	}
}
