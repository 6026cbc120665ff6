package faults

import (
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/handlers/validation"
	"appkb/internal/platform/apperr"
)

// Middleware honours X-Appkb-Fault (serve
// --faults): it waits, answers an error, or wraps the response so that the
// event stream is cut or ends in an error event.
func Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get(Header)
		if h == "" || strings.HasPrefix(c.Request().URL.Path, validation.AdminBasePath+"/") {
			return next(c)
		}
		f, err := Parse(h)
		if err != nil {
			return apperr.InvalidParam("%s", err.Error())
		}
		if f.Delay > 0 {
			t := time.NewTimer(f.Delay)
			select {
			case <-c.Request().Context().Done():
				t.Stop()
				return c.Request().Context().Err()
			case <-t.C:
			}
		}
		if f.Status != 0 {
			b := f.Body()
			return apperr.New(f.Status, b["code"].(string), "%s", b["message"].(string))
		}
		if f.Streams() {
			res := c.Response()
			res.Writer = f.Writer(res.Writer)
		}
		return next(c)
	}
}
