package handlers

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/db"
	"appkb/handlers/apidocs"
	"appkb/handlers/guard"
	"appkb/handlers/health"
	"appkb/handlers/ratelimit"
	"appkb/handlers/validation"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/metrics"
	"appkb/models"
)

// Ops configures what operators (not API clients) use: probes, metrics,
// CORS, rate limits and the reference page. The zero value turns the
// optional parts off.
type Ops struct {
	// CORSOrigins lists the browser origins allowed to call /v1; "*" allows
	// any. Empty disables CORS.
	CORSOrigins []string
	// RateLimit is the requests per second each API key may send (0: no
	// limit); RateBurst is how many it may send at once.
	RateLimit float64
	RateBurst int
	// MetricsToken, when set, is the bearer token GET /metrics requires.
	MetricsToken string
	// Ready lists readiness conditions beyond the database's (background
	// workers, shutdown in progress…).
	Ready []health.Check
}

// statusClientClosed is logged (never sent) when the client went away
// before the answer was complete, as nginx does.
const statusClientClosed = 499

// quietRoutes are logged at debug level when they succeed.
var quietRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// ctxErrorCode is where the error handler leaves the code it answered with.
const ctxErrorCode = "appkb.error_code"

// mountOps adds the probes, metrics and the API reference page, all outside
// /v1 and without API keys.
func mountOps(e *echo.Echo, d Deps) {
	sqlDB, _ := d.DB.DB()
	checks := append([]health.Check{
		{Name: "database", Fn: func(ctx context.Context) error {
			if sqlDB == nil {
				return errors.New("no connection pool")
			}
			return sqlDB.PingContext(ctx)
		}},
		{Name: "migrations", Fn: func(ctx context.Context) error { return db.CheckCurrent(d.DB.WithContext(ctx)) }},
	}, d.Ops.Ready...)
	e.GET("/healthz", echo.WrapHandler(health.Live()))
	e.GET("/readyz", echo.WrapHandler(health.Ready(checks...)))
	e.GET("/metrics", echo.WrapHandler(metrics.Handler(metrics.Source{
		DB:    sqlDB,
		Token: d.Ops.MetricsToken,
		QueueDepth: func(ctx context.Context) (int64, error) {
			var n int64
			err := d.DB.WithContext(ctx).Table("indexing_jobs").Where("state IN ?", []string{"queued", "running"}).Count(&n).Error
			return n, err
		},
	})))
	e.GET("/docs", echo.WrapHandler(apidocs.Page()))
	e.GET("/docs/", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/docs") })
	e.GET(apidocs.ScriptPath, echo.WrapHandler(apidocs.Script()))
}

// rateLimit counts requests per API key once the validator has
// authenticated them; requests over the limit get 429 with Retry-After.
func rateLimit(l *ratelimit.Limiter) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, ok := validation.Principal(c.Request().Context())
			if l == nil || !ok {
				return next(c)
			}
			allowed, wait := l.Allow(p.KeyID)
			if allowed {
				return next(c)
			}
			secs := int(math.Ceil(wait.Seconds()))
			c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			metrics.RateLimited()
			return apperr.New(http.StatusTooManyRequests, "too_many_requests",
				"This API key is over its rate limit; retry in %d second(s).", max(secs, 1))
		}
	}
}

// observe logs one line per request and feeds the request metrics. It calls
// the error handler itself, so the status it records is the one sent.
func observe(log *slog.Logger) echo.MiddlewareFunc {
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
				status = toAPIError(err).Status
			}
			elapsed := time.Since(start)
			route := c.Path()
			if route == "" || (status == http.StatusNotFound && c.Get(ctxErrorCode) == apperr.CodeNotFound && strings.HasSuffix(route, "*")) {
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
			if code, ok := c.Get(ctxErrorCode).(string); ok {
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
