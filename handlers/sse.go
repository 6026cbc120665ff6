package handlers

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/audio"
	"appkb/chat"
)

// sseWriter writes a message stream the way Dify frames it: each event is
// one `data: {json}` line followed by a blank line, and keep-alives are a
// bare `event: ping` line followed by a blank line. Every frame is flushed
// at once.
type sseWriter struct {
	res *echo.Response
}

// startSSE sends the stream's headers. Streams may outlive the server's
// write timeout, so the deadline is lifted for this response; writers that
// cannot do that (test recorders) are fine without.
func startSSE(c echo.Context) *sseWriter {
	res := c.Response()
	h := res.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("X-Accel-Buffering", "no")
	_ = http.NewResponseController(res).SetWriteDeadline(time.Time{})
	res.WriteHeader(http.StatusOK)
	res.Flush()
	return &sseWriter{res: res}
}

// event writes one data frame.
func (w *sseWriter) event(v any) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return err
	}
	frame := make([]byte, 0, len(payload)+8)
	frame = append(frame, "data: "...)
	frame = append(frame, payload...)
	frame = append(frame, "\n\n"...)
	return w.write(frame)
}

// ping writes a keep-alive.
func (w *sseWriter) ping() error { return w.write([]byte("event: ping\n\n")) }

func (w *sseWriter) write(frame []byte) error {
	if _, err := w.res.Write(frame); err != nil {
		return err
	}
	return http.NewResponseController(w.res).Flush()
}

// answer runs a prepared generation and sends its answer: one JSON object
// for a blocking request, an event stream otherwise.
func (s *Server) answer(c echo.Context, g *chat.Generation) error {
	if !g.Streaming {
		res, err := g.Run(c.Request().Context(), nil)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, g.BlockingResponse(res))
	}
	return s.stream(c, g)
}

// stream runs the generation in its own goroutine and writes its events as
// they come, with a ping whenever nothing was sent for pingInterval. A
// client that goes away cancels the request context and with it the model
// call; a failed write does the same. The handler returns only after the
// generation has stored its message. A failure after the stream began is
// reported as an error event, which ends the stream.
//
// When the app auto-plays answers, message_end is held back until the
// finished answer has been spoken: its tts_message pieces go out first,
// then message_end, then tts_message_end. A stopped answer is not spoken.
func (s *Server) stream(c echo.Context, g *chat.Generation) error {
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	var appID string
	if p, err := principalFrom(ctx); err == nil {
		appID = p.AppID
	}

	events := make(chan chat.Event, 16)
	var runErr error
	go func() {
		defer close(events)
		forward := func(ev chat.Event) error {
			select {
			case events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var end *chat.MessageEndEvent
		res, err := g.Run(ctx, func(ev chat.Event) error {
			if e, ok := ev.(chat.MessageEndEvent); ok {
				end = &e
				return nil
			}
			return forward(ev)
		})
		if err != nil || end == nil {
			runErr = err
			return
		}
		var pieces []string
		if !res.Stopped {
			pieces = s.autoPlay(ctx, appID, res.Answer)
		}
		for _, piece := range pieces {
			if forward(ttsEvent{Event: eventTTSMessage, StreamBase: end.StreamBase, Audio: piece}) != nil {
				return
			}
		}
		if forward(*end) != nil || len(pieces) == 0 {
			return
		}
		_ = forward(ttsEvent{Event: eventTTSMessageEnd, StreamBase: end.StreamBase})
	}()

	w := startSSE(c)
	ping := time.NewTicker(s.pingInterval)
	defer ping.Stop()
	broken := false
	send := func(write func() error) {
		if broken {
			return
		}
		if err := write(); err != nil {
			broken = true
			cancel()
		}
	}
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				if runErr != nil && ctx.Err() == nil {
					send(func() error { return w.event(g.ErrorEvent(runErr)) })
				}
				return nil
			}
			send(func() error { return w.event(ev) })
			ping.Reset(s.pingInterval)
		case <-ping.C:
			send(w.ping)
		}
	}
}

// Names of the events that carry an answer's speech when the app
// auto-plays it.
const (
	eventTTSMessage    = "tts_message"
	eventTTSMessageEnd = "tts_message_end"
)

// ttsEvent is one piece of a chat or completion answer's speech
// (tts_message, base64 audio) or the mark after the last piece
// (tts_message_end, no audio). It repeats the ids of the answer's other
// events.
type ttsEvent struct {
	Event string `json:"event"`
	chat.StreamBase
	Audio string `json:"audio"`
}

func (e ttsEvent) EventName() string { return e.Event }

// workflowTTS is a piece of a workflow run's speech (tts_message) or the
// mark after the last one (tts_message_end) (StreamEventTtsMessage and
// StreamEventTtsMessageEnd).
type workflowTTS struct {
	Event         string `json:"event"`
	TaskID        string `json:"task_id"`
	WorkflowRunID string `json:"workflow_run_id"`
	CreatedAt     int64  `json:"created_at"`
	Audio         string `json:"audio"`
}

// spokenOutputs is the text read aloud for a run that streamed none: its
// text outputs, ordered by name and separated by blank lines. Outputs that
// are not text are not spoken.
func spokenOutputs(outputs map[string]any) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(outputs)) {
		if t, ok := outputs[name].(string); ok && strings.TrimSpace(t) != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n")
}

// autoPlay is the speech of an answer for an app that auto-plays answers,
// as base64 pieces, or nil (see audio.Service.AutoPlay). Speech is an
// extra: when synthesis fails the failure is logged and the answer goes
// out without audio.
func (s *Server) autoPlay(ctx context.Context, appID, text string) []string {
	if appID == "" || ctx.Err() != nil {
		return nil
	}
	pieces, err := audio.NewService(s.db, s.models).AutoPlay(ctx, appID, text)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("text to speech: auto-play failed, the answer goes out without audio", "app_id", appID, "error", err)
		}
		return nil
	}
	return pieces
}

// pumpFrames writes each value received on frames as one event until the
// producer closes the channel. The headers go out with the first frame, so
// a run refused before it starts still answers with a plain JSON error. A
// ping goes out whenever the stream was quiet for interval. A failed write
// (the client went away) cancels the run, and frames are still drained so
// that the producer never blocks. Once frames is closed, runErr tells how the
// producer ended: nil ends the stream; an error before any frame is returned
// as it is; an error after frames becomes the event errorEvent builds.
func pumpFrames(c echo.Context, interval time.Duration, cancel context.CancelCauseFunc, frames <-chan any,
	runErr func() error, errorEvent func(error) any) error {
	var w *sseWriter
	ping := time.NewTicker(interval)
	defer ping.Stop()
	broken := false
	send := func(write func() error) {
		if broken {
			return
		}
		if w == nil {
			w = startSSE(c)
		}
		if err := write(); err != nil {
			broken = true
			cancel(err)
		}
	}
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				err := runErr()
				if err == nil {
					return nil
				}
				if w == nil {
					return err
				}
				send(func() error { return w.event(errorEvent(err)) })
				return nil
			}
			send(func() error { return w.event(f) })
			ping.Reset(interval)
		case <-ping.C:
			send(func() error { return w.ping() })
		}
	}
}
