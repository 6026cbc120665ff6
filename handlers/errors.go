package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"appkb/db"
	"appkb/handlers/forms"
	"appkb/handlers/guard"
	"appkb/handlers/oaicompat"
	"appkb/internal/platform/apperr"
)

// errorHandler is Echo's central error handler: it is the one place where an
// error becomes the contract's body {"code","message","status"}.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			// A stream already started: the producer reports failures in-band.
			if !errors.Is(err, context.Canceled) {
				log.Warn("error after response started", requestAttrs(c), "error", err)
			}
			return
		}
		e := toAPIError(err)
		c.Set(ctxErrorCode, e.Code)
		if e.Status == http.StatusServiceUnavailable && c.Response().Header().Get("Retry-After") == "" {
			// Every 503 says when to come back.
			c.Response().Header().Set("Retry-After", "2")
		}
		if e.Status >= http.StatusInternalServerError && e.Status != http.StatusNotImplemented {
			log.Error("request failed", requestAttrs(c), "status", e.Status, "error", err)
		}
		switch {
		case c.Request().Method == http.MethodHead:
			err = c.NoContent(e.Status)
		case openAIPath(c.Request().URL.Path):
			// The OpenAI-compatible operations answer in OpenAI's shape.
			status, body := oaicompat.ToError(e)
			err = writeErrorJSON(c, status, body)
		default:
			err = writeErrorJSON(c, e.Status, e)
		}
		if err != nil {
			log.Warn("writing error response failed", requestAttrs(c), "error", err)
		}
	}
}

// writeErrorJSON writes an error body without JSON's HTML escaping, so that
// a message such as "Bearer <api-key>" reads as written, not as \u003c….
func writeErrorJSON(c echo.Context, status int, body any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return err
	}
	return c.Blob(status, echo.MIMEApplicationJSON, b.Bytes())
}

// toAPIError maps any error to the API error type. Errors of the domain
// carry their code and the status of apperr's table already; Echo's own
// errors (unknown route, wrong method, body limit, parameter binding) get
// the contract's codes here; anything unrecognised becomes a masked
// internal error.
func toAPIError(err error) *apperr.Error {
	var ae *apperr.Error
	if errors.As(err, &ae) && (ae.Status < http.StatusInternalServerError || !db.ConnectionLost(err)) {
		return ae
	}
	if db.ConnectionLost(err) {
		// Not a fault of the request nor a bug: the client may try again
		// once the database is back.
		return apperr.Wrap(err, http.StatusServiceUnavailable, guard.CodeServiceUnavailable,
			"The database cannot be reached right now; try again in a moment.")
	}
	if errors.Is(err, http.ErrMissingBoundary) || errors.Is(err, http.ErrNotMultipart) {
		// The generated wrappers of the file operations open the form
		// before a handler runs; a form without a boundary fails there.
		return forms.ReadError(err)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := fmt.Sprint(he.Message)
		switch he.Code {
		case http.StatusNotFound:
			return apperr.NotFound("The requested URL was not found on the server.")
		case http.StatusMethodNotAllowed:
			return apperr.Fail(apperr.CodeMethodNotAllowed, "The method is not allowed for the requested URL.")
		case http.StatusRequestEntityTooLarge:
			return apperr.Fail(apperr.CodeTooLarge, "The request body is too large.")
		case http.StatusBadRequest:
			return apperr.InvalidParam("%s", msg)
		case http.StatusUnauthorized:
			return apperr.Unauthorized("%s", msg)
		}
		if he.Code >= 400 && he.Code < 500 {
			return apperr.New(he.Code, strings.ToLower(strings.ReplaceAll(http.StatusText(he.Code), " ", "_")), "%s", msg)
		}
	}
	return apperr.Internal(err)
}

// recoverLog logs a recovered panic with its stack; the error handler then
// answers with a masked 500.
func recoverLog(log *slog.Logger) func(c echo.Context, err error, stack []byte) error {
	return func(c echo.Context, err error, stack []byte) error {
		log.Error("panic while serving request", requestAttrs(c), "panic", err, "stack", string(stack))
		return apperr.Internal(fmt.Errorf("panic: %w", err))
	}
}

func requestAttrs(c echo.Context) slog.Attr {
	return slog.Group("request",
		"id", c.Response().Header().Get(echo.HeaderXRequestID),
		"method", c.Request().Method,
		"path", c.Request().URL.Path,
	)
}
