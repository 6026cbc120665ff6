package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

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
func (s *Server) stream(c echo.Context, g *chat.Generation) error {
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()

	events := make(chan chat.Event, 16)
	var runErr error
	go func() {
		defer close(events)
		_, runErr = g.Run(ctx, func(ev chat.Event) error {
			select {
			case events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
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
