package guard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/handlers/admission"
	"appkb/internal/platform/apperr"
)

// A stream gives its admission slot back once its headers are out, so that
// long streams cannot keep other requests out.
func TestGuardReleasesStreamsAtHeaders(t *testing.T) {
	l := admission.New(1, 0)
	e := echo.New()
	e.Use(Middleware(Limits{Admission: l}))
	inFlight := map[string]int{}
	e.GET("/stream", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderContentType, "text/event-stream")
		c.Response().WriteHeader(http.StatusOK)
		inFlight["stream"] = l.InFlight()
		return nil
	})
	e.GET("/json", func(c echo.Context) error {
		err := c.JSON(http.StatusOK, map[string]string{})
		inFlight["json"] = l.InFlight()
		return err
	})
	for _, path := range []string{"/stream", "/json"} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", path, rec.Code)
		}
	}
	if inFlight["stream"] != 0 || inFlight["json"] != 1 {
		t.Fatalf("slots held after headers: %v (want stream 0, json 1)", inFlight)
	}
	if l.InFlight() != 0 {
		t.Fatalf("%d slots leaked", l.InFlight())
	}
}

// A body that stops arriving is cut off at the body timeout.
func TestGuardCutsOffSlowBodies(t *testing.T) {
	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		e := apperr.From(err)
		_ = c.JSON(e.Status, e)
	}
	e.Use(Middleware(Limits{BodyTimeout: 100 * time.Millisecond}))
	e.POST("/upload", func(c echo.Context) error {
		if _, err := io.ReadAll(c.Request().Body); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	})
	srv := httptest.NewServer(e)
	defer srv.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte(strings.Repeat("x", 1000))) // then nothing more
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/upload", pr)
	req.ContentLength = 1 << 20
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", res.StatusCode)
	}
}
