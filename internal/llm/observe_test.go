package llm

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestUpstreamFailureLoggedAtWarn(t *testing.T) {
	var buf syncBuf
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	tests := []struct {
		name   string
		status int
		want   []string
	}{
		{"rejected credentials", http.StatusUnauthorized, []string{"level=WARN", "provider=acme", "status=401"}},
		{"bad request", http.StatusBadRequest, []string{"level=WARN", "provider=acme", "status=400"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
				writeJSON(w, tc.status, map[string]any{"error": map[string]any{"message": "no"}})
			})
			u, _ := url.Parse(f.URL)
			m, err := registryFor(t, f.URL, "").Chat("acme", "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Chat(context.Background(), chatRequest()); err == nil {
				t.Fatal("the call did not fail")
			}
			line := ""
			for _, l := range strings.Split(buf.String(), "\n") {
				if strings.Contains(l, "status="+strings.TrimPrefix(tc.want[2], "status=")) && strings.Contains(l, "host="+u.Host) {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no warning naming host %s:\n%s", u.Host, buf.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("log line lacks %q: %s", w, line)
				}
			}
		})
	}
}
