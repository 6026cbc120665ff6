// Package guard protects the server from overload and from slow or
// oversized requests: it admits a request only when a slot is free, cuts
// off a body that arrives too slowly and bounds the writing of an answer.
package guard

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/handlers/admission"
	"appkb/handlers/ratelimit"
	"appkb/handlers/validation"
	"appkb/internal/platform/apperr"
)

// Limits protect the server from overload and from slow or oversized
// requests. A zero field switches its protection off.
type Limits struct {
	// Admission bounds the requests worked on at once; a request that finds
	// no free slot within its wait is answered 503 with Retry-After before
	// any work is done. A stream gives its slot back once its headers are
	// sent.
	Admission *admission.Limiter
	// BodyTimeout bounds the reading of a request body, counted from when
	// the request is admitted; a slower upload is cut off with 408. With
	// BodyMinRate, the time grows by one second for every BodyMinRate bytes
	// received (as Apache's mod_reqtimeout body=20,MinRate=500 does), so
	// that a large upload at a fair pace finishes and a trickle does not,
	// up to BodyMaxTimeout when set.
	BodyTimeout    time.Duration
	BodyMinRate    int
	BodyMaxTimeout time.Duration
	// WriteTimeout bounds the writing of a response that is not an event
	// stream, counted from when its headers are sent (streams set a
	// deadline per event instead).
	WriteTimeout time.Duration
	// MaxText bounds the length in characters of query and of each input
	// value; a longer one is refused with 400 invalid_param.
	MaxText int
	// UnknownKeys counts, per client address, requests under /v1 refused
	// for a missing, unknown or wrong kind of key; an address over its
	// limit gets 429 before its key is looked up. nil: no limit.
	UnknownKeys *ratelimit.Limiter
}

// CodeServiceUnavailable is the error code of the 503 an overloaded server
// answers with.
const CodeServiceUnavailable = "service_unavailable"

// ctxBodyTimedOut marks a request whose body was cut off for arriving too
// slowly. The server cancels the request's context then, as when the client
// goes away, but the client is still there and gets the 408.
const ctxBodyTimedOut = "appkb.body_timed_out"

// BodyTimedOut reports whether the request's body was cut off for arriving
// too slowly (its context is cancelled then, though the client is there).
func BodyTimedOut(c echo.Context) bool { return c.Get(ctxBodyTimedOut) != nil }

// errBodyTimeout is the answer to a request body that arrives too slowly.
func errBodyTimeout() *apperr.Error {
	return apperr.New(http.StatusRequestTimeout, apperr.CodeBadRequest,
		"The request body arrived too slowly and was cut off; send it again at a steadier pace.")
}

// Middleware applies Limits; it runs after the key has been checked
// (validation's AuthFirst) and before the request is validated and its
// body read, so a turned-away request costs almost nothing.
func Middleware(l Limits) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req, res := c.Request(), c.Response()
			if l.Admission != nil {
				release, err := l.Admission.Acquire(req.Context())
				if err != nil {
					if errors.Is(err, admission.ErrBusy) {
						retry := max(1, int(math.Ceil(l.Admission.Wait().Seconds())))
						res.Header().Set("Retry-After", strconv.Itoa(retry))
					}
					validation.CloseAfterAnswer(c)
					return apperr.New(http.StatusServiceUnavailable, CodeServiceUnavailable,
						"The server is busy; try again in a moment.")
				}
				defer release()
				res.Before(func() {
					if isEventStream(res.Header()) {
						release()
					}
				})
			}
			rc := http.NewResponseController(res.Writer)
			var body *deadlineBody
			if l.BodyTimeout > 0 && req.Body != nil && req.Body != http.NoBody {
				now := time.Now()
				b := &deadlineBody{ReadCloser: req.Body, rc: rc, start: now, limits: &l}
				b.deadline = b.due(0)
				if rc.SetReadDeadline(b.deadline) == nil {
					body, req.Body = b, b
				}
			}
			if l.WriteTimeout > 0 {
				res.Before(func() {
					if !isEventStream(res.Header()) {
						_ = rc.SetWriteDeadline(time.Now().Add(l.WriteTimeout))
					}
				})
			}
			err := next(c)
			if body != nil && body.timedOut {
				// Whatever the handler made of the failed read, the answer
				// is that the body came too slowly.
				c.Set(ctxBodyTimedOut, true)
				if !res.Committed {
					res.Header().Set(echo.HeaderConnection, "close")
					return errBodyTimeout()
				}
			}
			return err
		}
	}
}

func isEventStream(h http.Header) bool {
	return strings.HasPrefix(h.Get(echo.HeaderContentType), "text/event-stream")
}

// deadlineBody keeps the connection's read deadline while a request body
// is read: it moves the deadline later as bytes arrive (Limits.BodyMinRate),
// and clears it once the body has been read to its end, so that the
// deadline bounds the upload and nothing after it (a long stream must not
// lose its connection to it).
type deadlineBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	limits   *Limits
	start    time.Time
	deadline time.Time
	received int64
	done     bool
	timedOut bool
}

// due is the deadline once received bytes have arrived.
func (b *deadlineBody) due(received int64) time.Time {
	d := b.limits.BodyTimeout
	if rate := int64(b.limits.BodyMinRate); rate > 0 {
		d += time.Duration(received) * time.Second / time.Duration(rate)
	}
	if m := b.limits.BodyMaxTimeout; m > 0 && d > m {
		d = m
	}
	return b.start.Add(d)
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.done && b.limits.BodyMinRate > 0 {
		b.received += int64(n)
		// Move the deadline in steps of at least a second, not on every
		// read.
		if next := b.due(b.received); next.Sub(b.deadline) >= time.Second {
			if b.rc.SetReadDeadline(next) == nil {
				b.deadline = next
			}
		}
	}
	if err != nil && !b.done {
		b.done = true
		if errors.Is(err, io.EOF) {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	}
	var ne interface{ Timeout() bool }
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		b.timedOut = true
		return n, errBodyTimeout()
	}
	return n, err
}
