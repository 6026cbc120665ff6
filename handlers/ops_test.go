package handlers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/handlers"
	"appkb/handlers/health"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
	"appkb/internal/wiring"
)

// opsServer is a real HTTP server with the operator settings under test and
// its log captured as JSON lines.
type opsServer struct {
	url                  string
	appKey, knowledgeKey string
	appID                string
	db                   interface{ Close() error }
	gdb                  *gorm.DB
	log                  *lockedBuffer
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log records whose msg is msg.
func (b *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Text())
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func newOpsServer(t *testing.T, ops handlers.Ops, options ...func(*handlers.Deps)) *opsServer {
	t.Helper()
	_, _, specYAML := loadContract(t)
	gdb, err := db.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := gdb.DB()
	t.Cleanup(func() { sqlDB.Close() })
	keys, err := demo.Ensure(context.Background(), apps.NewStore(gdb), apikeys.NewStore(gdb))
	if err != nil {
		t.Fatal(err)
	}
	logBuf := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logBuf, nil))
	deps := handlers.Deps{DB: gdb, Logger: log, SpecYAML: specYAML, DataDir: t.TempDir(), Ops: ops}
	for _, o := range options {
		o(&deps)
	}
	e, err := wiring.NewServer(deps)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	return &opsServer{url: ts.URL, appKey: keys.AppKey, knowledgeKey: keys.KnowledgeKey, appID: keys.AppID, db: sqlDB, gdb: gdb, log: logBuf}
}

func (s *opsServer) call(t *testing.T, method, path, key string, header http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestHealthAndReadiness(t *testing.T) {
	var workersDown bool
	var mu sync.Mutex
	s := newOpsServer(t, handlers.Ops{Ready: []health.Check{{Name: "workers", Fn: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if workersDown {
			return errors.New("indexing workers are not running")
		}
		return nil
	}}}})
	probe := func(path string) (int, map[string]any) {
		res, body := s.call(t, "GET", path, "", nil, "")
		var v map[string]any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("GET %s: body %q is not JSON", path, body)
		}
		return res.StatusCode, v
	}
	steps := []struct {
		name          string
		before        func()
		path          string
		wantStatus    int
		wantReasonHas string
	}{
		{"alive", nil, "/healthz", 200, ""},
		{"ready", nil, "/readyz", 200, ""},
		{"workers stopped", func() { mu.Lock(); workersDown = true; mu.Unlock() }, "/readyz", 503, "workers"},
		{"workers back", func() { mu.Lock(); workersDown = false; mu.Unlock() }, "/readyz", 200, ""},
		{"database gone", func() { s.db.Close() }, "/readyz", 503, "database"},
		{"still alive without a database", nil, "/healthz", 200, ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.before != nil {
				st.before()
			}
			status, body := probe(st.path)
			if status != st.wantStatus {
				t.Fatalf("GET %s = %d %v, want %d", st.path, status, body, st.wantStatus)
			}
			reason, _ := body["reason"].(string)
			if st.wantReasonHas != "" && !strings.HasPrefix(reason, st.wantReasonHas) {
				t.Errorf("reason %q does not name %q", reason, st.wantReasonHas)
			}
			if st.wantReasonHas == "" && reason != "" {
				t.Errorf("unexpected reason %q", reason)
			}
		})
	}
}

func TestRequestLogCarriesRealStatus(t *testing.T) {
	s := newOpsServer(t, handlers.Ops{})
	tests := []struct {
		name       string
		method     string
		path       string
		key        string
		body       string
		header     http.Header
		wantStatus int
		wantRoute  string
		wantError  string
		wantApp    bool
	}{
		{"no key", "GET", "/v1/info", "", "", nil, 401, "/v1/info", "unauthorized", false},
		{"unknown route", "GET", "/v1/nothing-here", s.appKey, "", nil, 404, "unmatched", "not_found", false},
		{"wrong method", "DELETE", "/v1/info", s.appKey, "", nil, 405, "", "method_not_allowed", false},
		{"invalid body", "POST", "/v1/chat-messages", s.appKey, `{"inputs":{}}`, nil, 400, "/v1/chat-messages", "invalid_param", false},
		{"unknown conversation", "GET", "/v1/messages?user=u1&conversation_id=5f0c3e52-8b6f-4bd0-9d0a-0c7b1f4e2a10", s.appKey, "", nil, 404, "/v1/messages", "not_found", true},
		{"success", "GET", "/v1/info", s.appKey, "", nil, 200, "/v1/info", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, s.url+tc.path, strings.NewReader(tc.body))
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range tc.header {
				req.Header[k] = v
			}
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.wantStatus)
			}
			id := res.Header.Get("X-Request-Id")
			var rec map[string]any
			for _, l := range s.log.lines(t, "request") {
				if l["id"] == id {
					rec = l
				}
			}
			if rec == nil {
				t.Fatalf("no request line with id %q", id)
			}
			if got := int(rec["status"].(float64)); got != tc.wantStatus {
				t.Errorf("logged status %d, want %d", got, tc.wantStatus)
			}
			if tc.wantRoute != "" && rec["route"] != tc.wantRoute {
				t.Errorf("logged route %v, want %s", rec["route"], tc.wantRoute)
			}
			if tc.wantError != "" && rec["error"] != tc.wantError {
				t.Errorf("logged error code %v, want %s", rec["error"], tc.wantError)
			}
			if tc.wantApp && rec["app_id"] != s.appID {
				t.Errorf("logged app_id %v, want %s", rec["app_id"], s.appID)
			}
			if _, ok := rec["latency_ms"].(float64); !ok {
				t.Errorf("no latency in %v", rec)
			}
		})
	}
	s.log.mu.Lock()
	all := s.log.buf.String()
	s.log.mu.Unlock()
	if strings.Contains(all, s.appKey) {
		t.Error("the log contains an API key")
	}
	// A knowledge key is logged by its id.
	res, _ := s.call(t, "GET", "/v1/datasets", s.knowledgeKey, nil, "")
	for _, l := range s.log.lines(t, "request") {
		if l["id"] == res.Header.Get("X-Request-Id") && (l["key_id"] == nil || l["key_id"] == "") {
			t.Errorf("knowledge request logged without key_id: %v", l)
		}
	}
}

func TestClientThatGaveUpIsLogged499(t *testing.T) {
	// The model never sends its first chunk: the stream stays open until the
	// client leaves.
	// The stream finds out that its client left when its next keep-alive
	// ping fails; a short ping interval makes that 200 ms instead of the
	// default 10 s.
	model := newFakeModel(time.Hour, "never")
	s := newOpsServer(t, handlers.Ops{}, func(d *handlers.Deps) {
		d.ChatModels = fakeModels{model}
		d.PingInterval = 200 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := liveStream(t, ctx, s.url, s.appKey, `{"query":"hello","inputs":{},"user":"u1","response_mode":"streaming"}`)
	id := res.Header.Get("X-Request-Id")

	_, metrics := s.call(t, "GET", "/metrics", "", nil, "")
	if !strings.Contains(metrics, "appkb_http_active_streams 1") {
		t.Errorf("an open stream is not counted:\n%s", grepLines(metrics, "active_streams"))
	}
	cancel()
	res.Body.Close()
	<-model.ended // the handler noticed
	for range 400 {
		for _, l := range s.log.lines(t, "request") {
			if l["id"] == id {
				if got := int(l["status"].(float64)); got != 499 {
					t.Fatalf("logged status %d for a client that went away, want 499", got)
				}
				return
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatal("no request line for the abandoned stream")
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestMetricsAfterTraffic(t *testing.T) {
	s := newOpsServer(t, handlers.Ops{MetricsToken: "scrape-secret"})
	s.call(t, "GET", "/v1/info", s.appKey, nil, "")
	s.call(t, "GET", "/v1/info", "", nil, "")
	s.call(t, "POST", "/v1/chat-messages", s.appKey, nil, `{"query":"hello","inputs":{},"user":"u1"}`)
	_, stream := s.call(t, "POST", "/v1/chat-messages", s.appKey, nil, `{"query":"hello","inputs":{},"user":"u1","response_mode":"streaming"}`)
	if !strings.Contains(stream, "message_end") {
		t.Fatalf("stream did not finish: %s", stream)
	}
	flow, err := apps.NewStore(s.gdb).Import(context.Background(), []byte(workflowApp("greeter", greeterGraph)))
	if err != nil {
		t.Fatal(err)
	}
	flowKey, err := apikeys.NewStore(s.gdb).CreateAppKey(context.Background(), flow.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if res, body := s.call(t, "POST", "/v1/workflows/run", flowKey, nil, `{"inputs":{"name":"x","n":9},"user":"u1","response_mode":"blocking"}`); res.StatusCode != 200 {
		t.Fatalf("workflow run: %d %s", res.StatusCode, body)
	}

	if res, _ := s.call(t, "GET", "/metrics", "", nil, ""); res.StatusCode != 401 {
		t.Fatalf("GET /metrics without the token: %d", res.StatusCode)
	}
	res, body := s.call(t, "GET", "/metrics", "scrape-secret", nil, "")
	if res.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", res.StatusCode)
	}
	for _, want := range []string{
		`appkb_http_requests_total{method="GET",route="/v1/info",status="200"}`,
		`appkb_http_requests_total{method="GET",route="/v1/info",status="401"}`,
		`appkb_http_requests_total{method="POST",route="/v1/chat-messages",status="200"}`,
		`appkb_http_request_duration_seconds_bucket{method="GET",route="/v1/info",le="0.005"}`,
		`appkb_http_requests_in_flight `,
		`appkb_http_active_streams 0`,
		`appkb_model_calls_total{kind="chat",outcome="ok",provider="appkb"}`,
		`appkb_model_call_duration_seconds_count{kind="chat",provider="appkb"}`,
		`appkb_model_tokens_total{direction="completion",provider="appkb"}`,
		`appkb_indexing_queue_depth 0`,
		`appkb_workflow_runs_total{status="succeeded"}`,
		`appkb_workflow_node_executions_total{node_type="code",status="succeeded"}`,
		`go_sql_open_connections{db_name="appkb"}`,
		`go_goroutines `,
		`go_memstats_heap_alloc_bytes `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, name := range []string{"appkb_workflow_runs_total", "appkb_workflow_node_executions_total", "appkb_indexing_documents_total"} {
		if !strings.Contains(body, "# HELP "+name) && strings.Contains(body, name+"{") {
			t.Errorf("%s has no help text", name)
		}
	}
}

func TestCORSPreflight(t *testing.T) {
	preflight := http.Header{
		"Origin":                         {"https://app.example"},
		"Access-Control-Request-Method":  {"POST"},
		"Access-Control-Request-Headers": {"authorization,content-type"},
	}
	t.Run("configured origin", func(t *testing.T) {
		s := newOpsServer(t, handlers.Ops{CORSOrigins: []string{"https://app.example"}})
		res, _ := s.call(t, "OPTIONS", "/v1/chat-messages", "", preflight, "")
		if res.StatusCode != http.StatusNoContent {
			t.Fatalf("preflight: %d", res.StatusCode)
		}
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example" {
			t.Errorf("Allow-Origin %q", got)
		}
		if got := strings.ToLower(res.Header.Get("Access-Control-Allow-Headers")); !strings.Contains(got, "authorization") {
			t.Errorf("Allow-Headers %q", got)
		}
		res, _ = s.call(t, "GET", "/v1/info", s.appKey, http.Header{"Origin": {"https://app.example"}}, "")
		if res.StatusCode != 200 || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
			t.Errorf("simple request: %d, Allow-Origin %q", res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
		}
		other := http.Header{"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"POST"}}
		res, _ = s.call(t, "OPTIONS", "/v1/chat-messages", "", other, "")
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("another origin was allowed: %q", got)
		}
	})
	t.Run("any origin", func(t *testing.T) {
		s := newOpsServer(t, handlers.Ops{CORSOrigins: []string{"*"}})
		res, _ := s.call(t, "OPTIONS", "/v1/datasets", "", preflight, "")
		if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("preflight: %d, Allow-Origin %q", res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
		}
	})
	t.Run("off by default", func(t *testing.T) {
		s := newOpsServer(t, handlers.Ops{})
		res, _ := s.call(t, "OPTIONS", "/v1/chat-messages", "", preflight, "")
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight without CORS: %d, Allow-Origin %q", res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
		}
	})
}

func TestRateLimitPerKey(t *testing.T) {
	// One request every 1000 s with a burst of 2: the third is refused,
	// whatever the speed of the machine.
	s := newOpsServer(t, handlers.Ops{RateLimit: 0.001, RateBurst: 2})
	for i := range 2 {
		if res, body := s.call(t, "GET", "/v1/info", s.appKey, nil, ""); res.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i+1, res.StatusCode, body)
		}
	}
	res, body := s.call(t, "GET", "/v1/info", s.appKey, nil, "")
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: %d %s", res.StatusCode, body)
	}
	secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > 1000 {
		t.Errorf("Retry-After %q", res.Header.Get("Retry-After"))
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Status  int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != "too_many_requests" || e.Status != 429 || e.Message == "" {
		t.Errorf("429 body %s", body)
	}
	// Another key has its own bucket.
	if res, _ := s.call(t, "GET", "/v1/datasets", s.knowledgeKey, nil, ""); res.StatusCode != 200 {
		t.Errorf("another key was limited too: %d", res.StatusCode)
	}
	// Requests without a valid key are not counted against anyone.
	if res, _ := s.call(t, "GET", "/v1/info", "", nil, ""); res.StatusCode != 401 {
		t.Errorf("unauthenticated request: %d", res.StatusCode)
	}
}

// TestDocsPageInBrowser loads /docs in headless Chromium and checks that
// Redoc rendered the operations of openapi.yaml from the embedded bundle.
func TestDocsPageInBrowser(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("chromium is not installed (apt-get install chromium); skipping the browser test of /docs")
	}
	s := newOpsServer(t, handlers.Ops{})
	res, page := s.call(t, "GET", "/docs", "", nil, "")
	if res.StatusCode != 200 || !strings.Contains(page, "redoc") {
		t.Fatalf("GET /docs: %d", res.StatusCode)
	}
	if strings.Contains(page, "https://") || strings.Contains(page, "http://") {
		t.Error("the page refers to another host")
	}
	dir := t.TempDir()
	args := func(extra ...string) []string {
		return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
			"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
			"--user-data-dir=" + filepath.Join(dir, "profile"), "--virtual-time-budget=60000", "--window-size=1280,2000"}, extra...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dom, err := exec.CommandContext(ctx, browser, args("--dump-dom", s.url+"/docs")...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	html := string(dom)
	for _, want := range []string{"Ask a chat app something", "/chat-messages", "/datasets"} {
		if !strings.Contains(html, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	if strings.Contains(html, "Something went wrong") {
		t.Error("Redoc reported an error")
	}
	shot := filepath.Join(dir, "docs.png")
	if out, err := exec.CommandContext(ctx, browser, args("--screenshot="+shot, s.url+"/docs")...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 10_000 {
		t.Errorf("screenshot %s missing or blank (%v)", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}
