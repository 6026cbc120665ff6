package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"appkb/handlers"
)

// /docs/ sends the browser to /docs (whose script path is relative), and
// error messages arrive as written, without JSON's HTML escapes.
func TestDocsSlashAndUnescapedErrors(t *testing.T) {
	s := newOpsServer(t, handlers.Ops{})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(s.url + "/docs/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/docs" {
		t.Errorf("GET /docs/: %d Location %q, want 301 to /docs", res.StatusCode, res.Header.Get("Location"))
	}
	res, page := s.call(t, "GET", "/docs/", "", nil, "")
	if res.StatusCode != http.StatusOK || !strings.Contains(page, "redoc") {
		t.Errorf("GET /docs/ followed: %d %.80q", res.StatusCode, page)
	}

	tests := []struct {
		name, auth string
		want       string
	}{
		{"no key", "", `"message":"Authorization header must be 'Bearer <api-key>'."`},
		{"not bearer", "Basic abc", `"message":"Authorization header must be 'Bearer <api-key>'."`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.auth != "" {
				h.Set("Authorization", tc.auth)
			}
			res, body := s.call(t, "GET", "/v1/info", "", h, "")
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			if !strings.Contains(body, tc.want) || strings.Contains(body, `\u003c`) {
				t.Errorf("body %s, want it to contain %s", body, tc.want)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}
