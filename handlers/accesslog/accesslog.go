// Package accesslog writes the one log line of each request and feeds the
// request metrics (count, latency, open streams).
package accesslog

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/handlers/guard"
	"appkb/handlers/validation"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/metrics"
	"appkb/models"
)

// ErrorCodeKey is where the error handler leaves, in the Echo context, the
// code it answered with; the log line names it.
const ErrorCodeKey = "appkb.error_code"

// statusClientClosed is logged (never sent) when the client went away
// before the answer was complete, as nginx does.
const statusClientClosed = 499

// quietRoutes are logged at debug level when they succeed.
var quietRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// Middleware logs one line per request and feeds the request metrics. It
// calls the error handler itself, so the status it records is the one
// sent; statusOf gives the one an error is answered with when the error
// handler wrote nothing.
func Middleware(log *slog.Logger, statusOf func(error) int) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			done := metrics.RequestStarted()
			defer done()
			res := c.Response()
			var closeStream func()
			res.Before(func() {
				if strings.HasPrefix(res.Header().Get(echo.HeaderContentType), "text/event-stream") {
					closeStream = metrics.StreamOpened()
				}
			})

			err := next(c)
			req := c.Request()
			// A body cut off for slowness cancels the context too, but its
			// client is still there for the 408.
			gone := req.Context().Err() != nil && !guard.BodyTimedOut(c)
			if err != nil && !(gone && !res.Committed) {
				c.Error(err)
			}
			if closeStream != nil {
				closeStream()
			}
			status := res.Status
			if gone {
				status = statusClientClosed
			} else if err != nil && !res.Committed {
				status = statusOf(err)
			}
			elapsed := time.Since(start)
			route := c.Path()
			if route == "" || (status == http.StatusNotFound && c.Get(ErrorCodeKey) == apperr.CodeNotFound && strings.HasSuffix(route, "*")) {
				route = "unmatched"
			}
			metrics.Request(route, req.Method, status, elapsed)

			attrs := []slog.Attr{
				slog.String("id", res.Header().Get(echo.HeaderXRequestID)),
				slog.String("method", req.Method),
				slog.String("route", route),
				slog.String("path", req.URL.Path),
				slog.Int("status", status),
				slog.Float64("latency_ms", float64(elapsed.Microseconds())/1000),
				slog.Int64("bytes", res.Size),
				slog.String("remote", c.RealIP()),
			}
			if p, ok := validation.Principal(req.Context()); ok {
				if p.Kind == models.KeyKindApp {
					attrs = append(attrs, slog.String("app_id", p.AppID))
				} else {
					attrs = append(attrs, slog.String("key_id", p.KeyID))
				}
			}
			if code, ok := c.Get(ErrorCodeKey).(string); ok {
				attrs = append(attrs, slog.String("error", code))
			}
			level := slog.LevelInfo
			switch {
			case status >= 500 && status != http.StatusNotImplemented:
				level = slog.LevelError
			case status < 400 && quietRoutes[route]:
				// Probes and scrapes come every few seconds.
				level = slog.LevelDebug
			}
			log.LogAttrs(req.Context(), level, "request", attrs...)
			return nil
		}
	}
}
