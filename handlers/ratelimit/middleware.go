package ratelimit

import (
	"math"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"appkb/internal/platform/apperr"
	"appkb/internal/platform/metrics"
)

// Middleware counts the requests of each key that keyOf finds (the API key
// the validator authenticated); requests over the limit get 429 with
// Retry-After. Requests without a key, and all requests when l is nil,
// pass.
func Middleware(l *Limiter, keyOf func(*http.Request) (string, bool)) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key, ok := keyOf(c.Request())
			if l == nil || !ok {
				return next(c)
			}
			allowed, wait := l.Allow(key)
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
