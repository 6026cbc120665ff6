package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"appkb/db"
	"appkb/handlers"
	"appkb/handlers/journal"
	"appkb/internal/knowledge/documents"
	"appkb/internal/llm"
	"appkb/internal/wiring"
)

const adminToken = "test-admin-token"

type adminServer struct {
	*testServer
	scenarios *llm.Scenarios
	dataDir   string
}

// newAdminServer is the real server with the test double's controls on:
// the admin API, the request journal, scenarios and injected faults.
func newAdminServer(t *testing.T, faults bool) *adminServer {
	t.Helper()
	_, _, specYAML := loadContract(t)
	gdb := db.OpenTemp(t)
	reg, err := llm.Parse(nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	scenarios := llm.NewScenarios(nil)
	reg.FollowScenarios(scenarios)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dataDir := t.TempDir()
	e, err := wiring.NewServer(handlers.Deps{DB: gdb, Logger: log, SpecYAML: specYAML, DataDir: dataDir, Models: reg,
		Admin: handlers.Admin{Token: adminToken, Journal: journal.New(100), Scenarios: scenarios, Faults: faults}})
	if err != nil {
		t.Fatal(err)
	}
	stop := documents.Start(context.Background(), documents.Config{DB: gdb, DataDir: dataDir, Poll: 20 * time.Millisecond, Logger: log})
	t.Cleanup(stop)
	return &adminServer{testServer: &testServer{e: e, db: gdb}, scenarios: scenarios, dataDir: dataDir}
}

func (s *adminServer) admin(t *testing.T, method, path, body, contentType string) *httptest.ResponseRecorder {
	t.Helper()
	return s.do(t, request{method: method, path: "/admin/v1" + path, key: adminToken, body: body, contentType: contentType})
}

func TestAdminAPI(t *testing.T) {
	s := newAdminServer(t, false)
	dsl, err := os.ReadFile("../testdata/apps/chat.yml")
	if err != nil {
		t.Fatal(err)
	}

	// Off without the token, and the token is checked.
	for _, key := range []string{"", "wrong", "app-notakey"} {
		rec := s.do(t, request{method: "GET", path: "/admin/v1/apps", key: key})
		expectStatus(t, rec, 401, "unauthorized")
	}
	// The admin operations are not served under /v1, nor the service ones
	// under /admin/v1.
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/apps", key: adminToken}), 404, "not_found")
	expectStatus(t, s.do(t, request{method: "GET", path: "/admin/v1/info", key: adminToken}), 404, "not_found")

	rec := s.admin(t, "POST", "/apps", string(dsl), "application/octet-stream")
	expectStatus(t, rec, 201, "")
	var app struct{ AppID, APIKey, Mode string }
	var raw map[string]any
	decodeInto(t, rec, &raw)
	app.AppID, app.APIKey, app.Mode = raw["app_id"].(string), raw["api_key"].(string), raw["mode"].(string)
	if app.Mode != "chat" || !strings.HasPrefix(app.APIKey, "app-") {
		t.Fatalf("imported %v", raw)
	}
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/info", key: app.APIKey}), 200, "")
	expectStatus(t, s.admin(t, "POST", "/apps", "{not a dsl", "application/octet-stream"), 400, "invalid_param")

	rec = s.admin(t, "GET", "/apps", "", "")
	expectStatus(t, rec, 200, "")
	var list struct{ Data []map[string]any }
	decodeInto(t, rec, &list)
	if len(list.Data) != 1 || list.Data[0]["app_id"] != app.AppID {
		t.Fatalf("apps %v", list.Data)
	}

	renamed := strings.Replace(string(dsl), "name: ", "name: Renamed ", 1)
	rec = s.admin(t, "PUT", "/apps/"+app.AppID, renamed, "application/octet-stream")
	expectStatus(t, rec, 200, "")
	expectStatus(t, s.admin(t, "PUT", "/apps/no-such-app", renamed, "application/octet-stream"), 404, "not_found")

	rec = s.admin(t, "POST", "/apps/"+app.AppID+"/keys", "", "")
	expectStatus(t, rec, 201, "")
	var second struct {
		APIKey string `json:"api_key"`
	}
	decodeInto(t, rec, &second)
	expectStatus(t, s.admin(t, "DELETE", "/keys/"+app.APIKey, "", ""), 204, "")
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/info", key: app.APIKey}), 401, "unauthorized")
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/info", key: second.APIKey}), 200, "")
	expectStatus(t, s.admin(t, "DELETE", "/keys/app-nosuchkeyatall000000000", "", ""), 404, "not_found")

	rec = s.admin(t, "POST", "/knowledge-bases", `{"name":"handbook","documents":[{"name":"bikes.txt","text":"Bicycles may be parked in the courtyard racks."}]}`, "")
	expectStatus(t, rec, 201, "")
	var kb struct {
		DatasetID   string   `json:"dataset_id"`
		DocumentIDs []string `json:"document_ids"`
		APIKey      string   `json:"api_key"`
	}
	decodeInto(t, rec, &kb)
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/datasets/" + kb.DatasetID + "/documents", key: kb.APIKey}), 200, "")
	expectStatus(t, s.admin(t, "POST", "/knowledge-bases", `{"name":"handbook"}`, ""), 409, "dataset_name_duplicate")
	expectStatus(t, s.admin(t, "POST", "/knowledge-bases", `{"documents":[]}`, ""), 400, "invalid_param")

	rec = s.admin(t, "POST", "/knowledge-keys", `{"dataset_ids":["`+kb.DatasetID+`"]}`, "")
	expectStatus(t, rec, 201, "")
	expectStatus(t, s.admin(t, "POST", "/knowledge-keys", `{"dataset_ids":["nope"]}`, ""), 404, "not_found")
	expectStatus(t, s.admin(t, "POST", "/knowledge-keys", "", ""), 201, "")

	expectStatus(t, s.admin(t, "DELETE", "/apps/"+app.AppID, "", ""), 204, "")
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/info", key: second.APIKey}), 401, "unauthorized")
	expectStatus(t, s.admin(t, "DELETE", "/apps/"+app.AppID, "", ""), 404, "not_found")

	expectStatus(t, s.admin(t, "POST", "/reset", "", ""), 204, "")
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/datasets/" + kb.DatasetID + "/documents", key: kb.APIKey}), 401, "unauthorized")
	rec = s.admin(t, "GET", "/apps", "", "")
	decodeInto(t, rec, &list)
	if len(list.Data) != 0 {
		t.Fatalf("apps after reset: %v", list.Data)
	}
}

func TestAdminJournal(t *testing.T) {
	s := newAdminServer(t, false)
	dsl, _ := os.ReadFile("../testdata/apps/chat.yml")
	var app map[string]any
	decodeInto(t, s.admin(t, "POST", "/apps", string(dsl), "application/octet-stream"), &app)
	key := app["api_key"].(string)
	s.do(t, request{method: "GET", path: "/v1/info", key: key})
	s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key, body: `{"query":"hi","user":"u1","inputs":{"traveller":"solo"},"response_mode":"blocking"}`})
	s.do(t, request{method: "GET", path: "/v1/conversations/nope/variables?user=u1", key: key})
	s.do(t, request{method: "GET", path: "/v1/info"})

	var got struct{ Data []map[string]any }
	rec := s.admin(t, "GET", "/requests", "", "")
	expectStatus(t, rec, 200, "")
	decodeInto(t, rec, &got)
	want := []string{"GET /v1/info 200", "POST /v1/chat-messages 200", "GET /v1/conversations/{conversation_id}/variables 404", "GET /v1/info 401"}
	if len(got.Data) != len(want) {
		t.Fatalf("journal %v, want %d entries (admin requests left out)", got.Data, len(want))
	}
	for i, e := range got.Data {
		if line := e["method"].(string) + " " + e["route"].(string) + " " + jsonNumber(e["status"]); line != want[i] {
			t.Errorf("entry %d: %s, want %s", i, line, want[i])
		}
	}
	if got.Data[1]["key_id"] == nil || got.Data[1]["body_bytes"].(float64) == 0 || got.Data[3]["key_id"] != nil {
		t.Errorf("key ids and sizes: %v", got.Data)
	}
	decodeInto(t, s.admin(t, "GET", "/requests?route=/v1/info&status=401", "", ""), &got)
	if len(got.Data) != 1 {
		t.Fatalf("filtered: %v", got.Data)
	}
	decodeInto(t, s.admin(t, "GET", "/requests?method=post&limit=5", "", ""), &got)
	if len(got.Data) != 1 || got.Data[0]["route"] != "/v1/chat-messages" {
		t.Fatalf("by method: %v", got.Data)
	}
	expectStatus(t, s.admin(t, "DELETE", "/requests", "", ""), 204, "")
	decodeInto(t, s.admin(t, "GET", "/requests", "", ""), &got)
	if len(got.Data) != 0 {
		t.Fatalf("after clearing: %v", got.Data)
	}
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestAdminScenarios(t *testing.T) {
	s := newAdminServer(t, false)
	dsl, _ := os.ReadFile("../testdata/apps/chat.yml")
	var app map[string]any
	decodeInto(t, s.admin(t, "POST", "/apps", string(dsl), "application/octet-stream"), &app)
	key, appID := app["api_key"].(string), app["app_id"].(string)
	ask := func(q string) (int, string) {
		rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key,
			body: `{"query":"` + q + `","user":"u1","inputs":{"traveller":"solo"},"response_mode":"blocking"}`})
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		answer, _ := body["answer"].(string)
		if answer == "" {
			answer, _ = body["code"].(string)
		}
		return rec.Code, answer
	}

	rec := s.admin(t, "PUT", "/scenario", "rules:\n  - query: weather\n    answer: Sunny everywhere.\n  - query: fail\n    fail: rate_limit\n", "application/octet-stream")
	expectStatus(t, rec, 200, "")
	if code, answer := ask("what is the weather"); code != 200 || answer != "Sunny everywhere." {
		t.Fatalf("scripted answer: %d %q", code, answer)
	}
	if code, answer := ask("please fail"); code != 400 || answer != "provider_quota_exceeded" {
		t.Fatalf("scripted failure: %d %q", code, answer)
	}
	expectStatus(t, s.admin(t, "PUT", "/apps/"+appID+"/scenario", "rules:\n  - query: weather\n    answer: Rainy in this app.\n", "application/octet-stream"), 200, "")
	if _, answer := ask("what is the weather"); answer != "Rainy in this app." {
		t.Fatalf("the app's own scenario comes first: %q", answer)
	}
	expectStatus(t, s.admin(t, "PUT", "/apps/"+appID+"/scenario", "rules:\n  - fail: explode\n", "application/octet-stream"), 400, "invalid_param")
	expectStatus(t, s.admin(t, "PUT", "/apps/no-such-app/scenario", "rules: []\n", "application/octet-stream"), 404, "not_found")
	expectStatus(t, s.admin(t, "DELETE", "/apps/"+appID+"/scenario", "", ""), 204, "")
	if _, answer := ask("what is the weather"); answer != "Sunny everywhere." {
		t.Fatalf("after removing the app's scenario: %q", answer)
	}
	expectStatus(t, s.admin(t, "DELETE", "/scenario", "", ""), 204, "")
	if code, answer := ask("what is the weather"); code != 200 || strings.Contains(answer, "Sunny") {
		t.Fatalf("without scenarios, the built-in answer: %d %q", code, answer)
	}
}

func TestInjectedFaults(t *testing.T) {
	s := newAdminServer(t, true)
	dsl, _ := os.ReadFile("../testdata/apps/chat.yml")
	var app map[string]any
	decodeInto(t, s.admin(t, "POST", "/apps", string(dsl), "application/octet-stream"), &app)
	key := app["api_key"].(string)
	chat := func(fault, mode string) *httptest.ResponseRecorder {
		return s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key, header: http.Header{"X-Appkb-Fault": {fault}},
			body: `{"query":"tell me about bicycles and parking in the courtyard","user":"u1","inputs":{"traveller":"solo"},"response_mode":"` + mode + `"}`})
	}
	expectStatus(t, chat("status=503", "blocking"), 503, "service_unavailable")
	expectStatus(t, chat("status=429,code=too_many_requests", "blocking"), 429, "too_many_requests")
	expectStatus(t, chat("explode=1", "blocking"), 400, "invalid_param")

	start := time.Now()
	expectStatus(t, chat("delay=300ms", "blocking"), 200, "")
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("answered after %v, before the delay", d)
	}

	events := func(rec *httptest.ResponseRecorder) []map[string]any {
		var out []map[string]any
		sc := bufio.NewScanner(strings.NewReader(rec.Body.String()))
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev map[string]any
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatalf("%v: %s", err, data)
				}
				out = append(out, ev)
			}
		}
		return out
	}
	full := events(chat("", "streaming"))
	if len(full) < 4 || full[len(full)-1]["event"] != "message_end" {
		t.Fatalf("a whole stream: %v", full)
	}
	cut := events(chat("cut-after=2", "streaming"))
	if len(cut) != 2 {
		t.Fatalf("cut after 2: got %d events", len(cut))
	}
	failed := events(chat("error-event=provider_quota_exceeded,error-after=1", "streaming"))
	if len(failed) != 2 || failed[1]["event"] != "error" || failed[1]["code"] != "provider_quota_exceeded" || failed[1]["task_id"] != failed[0]["task_id"] {
		t.Fatalf("error event after 1: %v", failed)
	}
}
