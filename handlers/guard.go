package handlers

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
	// the request is admitted; a slower upload is cut off.
	BodyTimeout time.Duration
	// WriteTimeout bounds the writing of a response that is not an event
	// stream, counted from when its headers are sent (streams set a
	// deadline per event instead).
	WriteTimeout time.Duration
	// MaxText bounds the length in characters of query and of each input
	// value; a longer one is refused with 400 invalid_param.
	MaxText int
}

// CodeServiceUnavailable is the error code of the 503 an overloaded server
// answers with.
const CodeServiceUnavailable = "service_unavailable"

// guard is the middleware that applies Limits; it runs before the request is
// validated, so a turned-away request costs almost nothing.
func guard(l Limits) echo.MiddlewareFunc {
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
			if l.BodyTimeout > 0 && req.Body != nil && req.Body != http.NoBody {
				if rc.SetReadDeadline(time.Now().Add(l.BodyTimeout)) == nil {
					req.Body = &deadlineBody{ReadCloser: req.Body, rc: rc}
				}
			}
			if l.WriteTimeout > 0 {
				res.Before(func() {
					if !isEventStream(res.Header()) {
						_ = rc.SetWriteDeadline(time.Now().Add(l.WriteTimeout))
					}
				})
			}
			return next(c)
		}
	}
}

func isEventStream(h http.Header) bool {
	return strings.HasPrefix(h.Get(echo.HeaderContentType), "text/event-stream")
}

// deadlineBody clears the connection's read deadline once the body has been
// read to its end, so that the deadline bounds the upload and nothing after
// it (a long stream must not lose its connection to it).
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.done {
		b.done = true
		if errors.Is(err, io.EOF) {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	}
	var ne interface{ Timeout() bool }
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		return n, apperr.New(http.StatusRequestTimeout, apperr.CodeBadRequest, "The request body was not sent in time.")
	}
	return n, err
}
