package handlers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
	"appkb/internal/knowledge/documents"
	"appkb/internal/wiring"
)

// The contract checker reads openapi.yaml from disk (not the copy compiled
// into gen/), so that a forgotten `make generate` shows up as a failure too.
var contract struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	// adminRouter finds the admin operations, whose paths have the server
	// /admin/v1 (kin-openapi's router reads only the document's servers).
	adminRouter routers.Router
	yaml        []byte
	err         error
}

func init() {
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
}

func loadContract(t *testing.T) (*openapi3.T, routers.Router, []byte) {
	t.Helper()
	contract.once.Do(func() {
		contract.yaml, contract.err = os.ReadFile("../openapi.yaml")
		if contract.err != nil {
			return
		}
		contract.doc, contract.err = openapi3.NewLoader().LoadFromData(contract.yaml)
		if contract.err != nil {
			return
		}
		if contract.err = contract.doc.Validate(context.Background()); contract.err != nil {
			return
		}
		contract.router, contract.err = legacy.NewRouter(contract.doc)
		if contract.err != nil {
			return
		}
		admin := *contract.doc
		admin.Servers = openapi3.Servers{{URL: "/admin/v1"}}
		admin.Paths = openapi3.NewPaths()
		for path, item := range contract.doc.Paths.Map() {
			if len(item.Servers) > 0 && item.Servers[0].URL == "/admin/v1" {
				admin.Paths.Set(path, item)
			}
		}
		contract.adminRouter, contract.err = legacy.NewRouter(&admin)
	})
	if contract.err != nil {
		t.Fatalf("openapi.yaml: %v", contract.err)
	}
	return contract.doc, contract.router, contract.yaml
}

// testServer is the real server over a temporary database, with the demo
// app installed and keys of every kind.
type testServer struct {
	e            *echo.Echo
	db           *gorm.DB
	appID        string
	appKey       string
	knowledgeKey string
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	_, _, specYAML := loadContract(t)
	gdb := db.OpenTemp(t)
	keys, err := demo.Ensure(context.Background(), apps.NewStore(gdb), apikeys.NewStore(gdb))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dataDir := t.TempDir()
	e, err := wiring.NewServer(handlers.Deps{DB: gdb, Logger: log, SpecYAML: specYAML, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	stopIndexing := documents.Start(context.Background(), documents.Config{DB: gdb, DataDir: dataDir, Poll: 20 * time.Millisecond, Logger: log})
	t.Cleanup(stopIndexing)
	return &testServer{e: e, db: gdb, appID: keys.AppID, appKey: keys.AppKey, knowledgeKey: keys.KnowledgeKey}
}

// request describes one call to the server.
type request struct {
	method, path, key string
	body              string
	contentType       string // defaults to application/json when body is set
	header            http.Header
}

// do serves one request and checks the response against openapi.yaml.
func (s *testServer) do(t *testing.T, r request) *httptest.ResponseRecorder {
	t.Helper()
	req := r.build()
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, req)
	checkResponse(t, r, rec)
	return rec
}

func (r request) build() *http.Request {
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req := httptest.NewRequest(r.method, r.path, body)
	for k, vs := range r.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.body != "" {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	return req
}

// checkResponse validates status, headers and body against the operation's
// responses in openapi.yaml; every data: frame of an event stream is checked
// against the schema its event name maps to (x-sse-events). Requests that
// match no operation must still answer with the error body.
func checkResponse(t *testing.T, r request, rec *httptest.ResponseRecorder) {
	t.Helper()
	doc, router, _ := loadContract(t)
	if strings.HasPrefix(r.path, "/admin/v1/") {
		router = contract.adminRouter
	}
	req := r.build()
	route, params, err := router.FindRoute(req)
	if err != nil {
		if rec.Code >= 400 {
			checkErrorBody(t, doc, rec)
		}
		return
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status:  rec.Code,
		Header:  rec.Header(),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	input.SetBodyBytes(rec.Body.Bytes())
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		t.Errorf("%s %s → %d does not match openapi.yaml: %v\nbody: %s", r.method, r.path, rec.Code, err, truncate(rec.Body.String()))
	}
	stream := strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream")
	if stream {
		checkEventStream(t, doc, route, rec.Code, rec.Body.Bytes())
	}
	checkReference(t, r, rec, route, stream)
}

func checkErrorBody(t *testing.T, doc *openapi3.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	var v any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Errorf("error answer is not JSON: %v: %s", err, truncate(rec.Body.String()))
		return
	}
	if err := doc.Components.Schemas["Error"].Value.VisitJSON(v); err != nil {
		t.Errorf("error answer does not match the Error schema: %v", err)
	}
}

func checkEventStream(t *testing.T, doc *openapi3.T, route *routers.Route, status int, body []byte) {
	t.Helper()
	resp := route.Operation.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		t.Errorf("no response %d declared for the stream", status)
		return
	}
	media := resp.Value.Content.Get("text/event-stream")
	if media == nil {
		t.Errorf("response %d declares no text/event-stream", status)
		return
	}
	events, _ := media.Extensions["x-sse-events"].(map[string]any)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if events == nil && payload == "[DONE]" {
			continue // the end of an OpenAI-style stream
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(payload), &v); err != nil {
			t.Errorf("stream frame is not JSON: %v: %s", err, truncate(payload))
			continue
		}
		name, _ := v["event"].(string)
		schemaName, _ := events[name].(string)
		if events == nil {
			// An OpenAI-style stream names no events: chunks, or an
			// error after a failure.
			schemaName = "OpenAIChatCompletionChunk"
			if _, failed := v["error"]; failed {
				schemaName = "OpenAIError"
			}
		}
		ref := doc.Components.Schemas[schemaName]
		if ref == nil {
			t.Errorf("stream event %q is not declared in x-sse-events", name)
			continue
		}
		if err := ref.Value.VisitJSON(v); err != nil {
			t.Errorf("stream event %q does not match %s: %v", name, schemaName, err)
		}
	}
}

func truncate(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

// errorCode reads the code of an error body.
func errorCode(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct {
		Code   string `json:"code"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body is not an error object: %s", rec.Body.String())
	}
	if body.Status != rec.Code {
		t.Errorf("status in body %d differs from HTTP status %d", body.Status, rec.Code)
	}
	return body.Code
}

// expectStatus fails the test unless the answer has the wanted status and,
// when wantCode is set, the wanted error code.
func expectStatus(t *testing.T, rec *httptest.ResponseRecorder, wantStatus int, wantCode string) {
	t.Helper()
	if rec.Code != wantStatus {
		t.Fatalf("status = %d, want %d; body %s", rec.Code, wantStatus, truncate(rec.Body.String()))
	}
	if wantCode != "" {
		if got := errorCode(t, rec); got != wantCode {
			t.Errorf("code = %q, want %q", got, wantCode)
		}
	}
}
