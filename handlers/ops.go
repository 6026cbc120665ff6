package handlers

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"appkb/db"
	"appkb/handlers/accesslog"
	"appkb/handlers/apidocs"
	"appkb/handlers/health"
	"appkb/handlers/validation"
	"appkb/internal/platform/metrics"
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

// ctxErrorCode is where the error handler leaves the code it answered with.
const ctxErrorCode = accesslog.ErrorCodeKey

// observe logs and measures every request (see accesslog.Middleware).
func observe(log *slog.Logger) echo.MiddlewareFunc {
	return accesslog.Middleware(log, func(err error) int { return toAPIError(err).Status })
}

// principalKey is the id of the key that authenticated the request, which
// the rate limit counts by.
func principalKey(r *http.Request) (string, bool) {
	p, ok := validation.Principal(r.Context())
	if !ok {
		return "", false
	}
	return p.KeyID, true
}

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
