package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"appkb/db"
	"appkb/handlers"
	"appkb/handlers/admission"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
	"appkb/internal/wiring"
)

func newLimitedServer(t *testing.T, lim handlers.Limits) *testServer {
	t.Helper()
	_, _, specYAML := loadContract(t)
	gdb := db.OpenTemp(t)
	keys, err := demo.Ensure(context.Background(), apps.NewStore(gdb), apikeys.NewStore(gdb))
	if err != nil {
		t.Fatal(err)
	}
	e, err := wiring.NewServer(handlers.Deps{DB: gdb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SpecYAML: specYAML, DataDir: t.TempDir(), Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{e: e, db: gdb, appID: keys.AppID, appKey: keys.AppKey, knowledgeKey: keys.KnowledgeKey}
}

// Over the limit a request waits, then is turned away with 503, Retry-After
// and the error body, before any work is done.
func TestOverloadAnswers503(t *testing.T) {
	l := admission.New(1, 20*time.Millisecond)
	s := newLimitedServer(t, handlers.Limits{Admission: l})
	release, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	chat := `{"query":"hi","inputs":{},"user":"u1"}`
	rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.appKey, body: chat})
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("got %d, Retry-After %q: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["code"] != "service_unavailable" || body["status"] != float64(503) {
		t.Fatalf("body %s", rec.Body)
	}
	var n int64
	s.db.Raw(`SELECT COUNT(*) FROM messages`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d messages stored by a refused request", n)
	}
	release()
	if rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.appKey, body: chat}); rec.Code != http.StatusOK {
		t.Fatalf("after release: %d %s", rec.Code, rec.Body)
	}
	if l.InFlight() != 0 {
		t.Fatalf("%d slots leaked", l.InFlight())
	}
}

func TestTextLimits(t *testing.T) {
	s := newLimitedServer(t, handlers.Limits{MaxText: 10})
	cases := []struct {
		name, body string
		status     int
		message    string
	}{
		{"query at the limit", `{"query":"héllo wörl","inputs":{},"user":"u1"}`, 200, ""},
		{"query over the limit", `{"query":"hello world","inputs":{},"user":"u1"}`, 400, "query is too long"},
		{"input over the limit", `{"query":"hi","inputs":{"name":"` + strings.Repeat("a", 11) + `"},"user":"u1"}`, 400, "inputs.name is too long"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.appKey, body: c.body})
			if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.message) {
				t.Fatalf("got %d %s", rec.Code, rec.Body)
			}
			if c.status == 400 && !strings.Contains(rec.Body.String(), `"invalid_param"`) {
				t.Fatalf("code: %s", rec.Body)
			}
		})
	}
}

// page=0 is refused alike on every paged list.
func TestPageZeroIsRefusedEverywhere(t *testing.T) {
	s := newTestServer(t)
	rec := s.do(t, request{method: "POST", path: "/v1/datasets", key: s.knowledgeKey, body: `{"name":"kb"}`})
	var ds struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &ds); err != nil || ds.ID == "" {
		t.Fatalf("create dataset: %d %s", rec.Code, rec.Body)
	}
	var msgs []string
	for _, path := range []string{"/v1/datasets?page=0", "/v1/datasets/" + ds.ID + "/documents?page=0"} {
		rec := s.do(t, request{method: "GET", path: path, key: s.knowledgeKey})
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"invalid_param"`) {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		var body struct{ Message string }
		json.Unmarshal(rec.Body.Bytes(), &body)
		msgs = append(msgs, body.Message)
	}
	if msgs[0] != msgs[1] {
		t.Errorf("messages differ: %q vs %q", msgs[0], msgs[1])
	}
}

// A streamed answer that ends is no longer marked as being written (a
// message still marked at start-up is closed as interrupted).
func TestStreamedMessageIsFinished(t *testing.T) {
	s := newTestServer(t)
	rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.appKey,
		body: `{"query":"hi","inputs":{},"user":"u1","response_mode":"streaming"}`})
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var total, generating int64
	s.db.Raw(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN generating THEN 1 ELSE 0 END), 0) FROM messages`).Row().Scan(&total, &generating)
	if total != 1 || generating != 0 {
		t.Fatalf("%d messages, %d still generating", total, generating)
	}
}
