package journal

import (
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/handlers/faults"
	"appkb/handlers/validation"
)

// Middleware writes every request into j (nil: none). The
// admin API's own requests are left out, so that a test reads only what
// its client sent.
func Middleware(j *Journal) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if j == nil {
			return next
		}
		return func(c echo.Context) error {
			req := c.Request()
			if strings.HasPrefix(req.URL.Path, validation.AdminBasePath+"/") {
				return next(c)
			}
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err) // render now, so that the status is known
				err = nil
			}
			e := Entry{Time: start.UTC(), Method: req.Method, Path: req.URL.Path,
				Route: routePattern(c.Path()), Status: c.Response().Status, BodyBytes: req.ContentLength,
				DurationMS: float64(time.Since(start).Microseconds()) / 1000, Fault: req.Header.Get(faults.Header)}
			if e.BodyBytes < 0 {
				e.BodyBytes = 0
			}
			if p, ok := validation.Principal(c.Request().Context()); ok {
				e.KeyID = p.KeyID
			}
			j.Add(e)
			return err
		}
	}
}

// routePattern writes an Echo route (/v1/conversations/:id) as the API
// description does (/v1/conversations/{id}).
func routePattern(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}
