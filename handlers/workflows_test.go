package handlers_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"appkb/handlers"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
)

// workflowApp wraps a graph in a workflow app definition.
func workflowApp(name, graph string) string {
	return `app: {mode: workflow, name: ` + name + `}
kind: app
version: 0.3.0
workflow:
  graph:
` + graph
}

// greeterGraph: start(name, n) → code (upper-case) → if n > 5 → template
// "Big …" → end_big, else → builtin llm → end_small.
const greeterGraph = `    nodes:
    - id: start
      data: {type: start, title: Start, variables: [
        {variable: name, label: Name, type: text-input, required: true, max_length: 40},
        {variable: n, label: N, type: number, required: false}]}
    - id: shout
      data: {type: code, title: Shout, code_language: javascript, code: 'function main({name}) { return {loud: name.toUpperCase()} }',
        variables: [{variable: name, value_selector: [start, name]}], outputs: {loud: {type: string}}}
    - id: cond
      data: {type: if-else, title: Is big, cases: [{case_id: 'true', logical_operator: and, conditions: [
        {variable_selector: [start, n], comparison_operator: '>', value: '5'}]}]}
    - id: big
      data: {type: template-transform, title: Big, template: 'Big {{ loud }}', variables: [{variable: loud, value_selector: [shout, loud]}]}
    - id: ask
      data: {type: llm, title: Ask, model: {provider: appkb, name: builtin, mode: chat}, prompt_template: [{role: user, text: 'Hello {{#shout.loud#}}'}]}
    - id: end_big
      data: {type: end, title: End big, outputs: [{variable: text, value_selector: [big, output]}]}
    - id: end_small
      data: {type: end, title: End small, outputs: [{variable: text, value_selector: [ask, text]}]}
    edges:
    - {source: start, sourceHandle: source, target: shout}
    - {source: shout, sourceHandle: source, target: cond}
    - {source: cond, sourceHandle: 'true', target: big}
    - {source: cond, sourceHandle: 'false', target: ask}
    - {source: big, sourceHandle: source, target: end_big}
    - {source: ask, sourceHandle: source, target: end_small}
`

// failingGraph: a code node that throws, with no error strategy.
const failingGraph = `    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: boom
      data: {type: code, title: Boom, code_language: javascript, code: 'function main() { throw new Error("kaboom") }', outputs: {}}
    - id: end
      data: {type: end, title: End, outputs: []}
    edges:
    - {source: start, sourceHandle: source, target: boom}
    - {source: boom, sourceHandle: source, target: end}
`

// slowGraph: a code node that spins until it is interrupted.
const slowGraph = `    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: spin
      data: {type: code, title: Spin, code_language: javascript, code: 'function main() { while (true) {} }', outputs: {}}
    - id: end
      data: {type: end, title: End, outputs: []}
    edges:
    - {source: start, sourceHandle: source, target: spin}
    - {source: spin, sourceHandle: source, target: end}
`

// workflowServer is a test server with three workflow apps; keys by name.
type workflowServer struct {
	*testServer
	keys, ids map[string]string
}

func newWorkflowServer(t *testing.T) *workflowServer {
	t.Helper()
	s := &workflowServer{testServer: newTestServer(t), keys: map[string]string{}, ids: map[string]string{}}
	for name, graph := range map[string]string{"greeter": greeterGraph, "failing": failingGraph, "slow": slowGraph} {
		s.ids[name], s.keys[name] = s.importText(t, workflowApp(name, graph))
	}
	return s
}

func (s *testServer) importText(t *testing.T, text string) (appID, key string) {
	t.Helper()
	ctx := context.Background()
	app, err := apps.NewStore(s.db).Import(ctx, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	key, err = apikeys.NewStore(s.db).CreateAppKey(ctx, app.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	return app.ID, key
}

func (s *workflowServer) run(t *testing.T, app, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	return s.do(t, request{method: "POST", path: path, key: s.keys[app], body: body})
}

// checkWorkflowStream asserts the framing of a workflow stream and returns
// its workflow_finished event: workflow_started first, workflow_finished
// last, node events in between with each node_finished after its
// node_started, and one task and run id throughout.
func checkWorkflowStream(t *testing.T, frames []frame) frame {
	t.Helper()
	var events []frame
	for _, f := range frames {
		if f.str("event") != "ping" {
			events = append(events, f)
		}
	}
	if len(events) < 2 || events[0].str("event") != "workflow_started" || events[len(events)-1].str("event") != "workflow_finished" {
		var names []string
		for _, f := range events {
			names = append(names, f.str("event"))
		}
		t.Fatalf("stream is not framed by workflow_started … workflow_finished: %v", names)
	}
	task, run := events[0].str("task_id"), events[0].str("workflow_run_id")
	open := map[string]bool{}
	for i, f := range events {
		if f.str("task_id") != task || f.str("workflow_run_id") != run {
			t.Errorf("event %d (%s) changes the task or run id", i, f.str("event"))
		}
		id, _ := at(map[string]any(f), "data", "id").(string)
		switch f.str("event") {
		case "node_started":
			open[id] = true
		case "node_finished":
			if !open[id] {
				t.Errorf("node_finished %s without node_started", id)
			}
			delete(open, id)
		case "workflow_started", "workflow_finished":
			if i != 0 && i != len(events)-1 {
				t.Errorf("%s in the middle of the stream", f.str("event"))
			}
		}
	}
	if len(open) > 0 {
		t.Errorf("nodes never finished: %v", open)
	}
	return events[len(events)-1]
}

func TestWorkflowRuns(t *testing.T) {
	s := newWorkflowServer(t)
	tests := []struct {
		name, app, body string
		wantStatus      string
		wantText        string
		wantError       string
		wantNodes       []string // node ids in node_finished order (streaming)
	}{
		{"blocking run takes the true branch", "greeter", `{"inputs":{"name":"ann","n":7},"user":"alice"}`,
			"succeeded", "Big ANN", "", nil},
		{"blocking run takes the llm branch", "greeter", `{"inputs":{"name":"bob","n":1},"user":"alice","response_mode":"blocking"}`,
			"succeeded", "Hello BOB", "", nil},
		{"streaming run reports every node", "greeter", `{"inputs":{"name":"cy","n":9},"user":"bob","response_mode":"streaming"}`,
			"succeeded", "Big CY", "", []string{"start", "shout", "cond", "big", "end_big"}},
		{"failing code node fails a blocking run", "failing", `{"inputs":{},"user":"alice"}`,
			"failed", "", "kaboom", nil},
		{"failing code node fails a streaming run", "failing", `{"inputs":{},"user":"alice","response_mode":"streaming"}`,
			"failed", "", "kaboom", []string{"start", "boom"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.run(t, tc.app, "/v1/workflows/run", tc.body)
			expectStatus(t, rec, 200, "")
			var data map[string]any
			var taskID, runID string
			if tc.wantNodes != nil {
				if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
					t.Fatalf("content type %q", ct)
				}
				frames := readFrames(t, rec.Body.String())
				end := checkWorkflowStream(t, frames)
				data, _ = end["data"].(map[string]any)
				taskID, runID = end.str("task_id"), end.str("workflow_run_id")
				var ran []string
				for _, f := range frames {
					if f.str("event") == "node_finished" {
						ran = append(ran, at(map[string]any(f), "data", "node_id").(string))
					}
				}
				if strings.Join(ran, " ") != strings.Join(tc.wantNodes, " ") {
					t.Errorf("nodes %v, want %v", ran, tc.wantNodes)
				}
			} else {
				body := decode(t, rec)
				data, _ = body["data"].(map[string]any)
				taskID, _ = body["task_id"].(string)
				runID, _ = body["workflow_run_id"].(string)
			}
			if data["status"] != tc.wantStatus || data["id"] != runID || taskID == "" {
				t.Fatalf("data %v (task %q, run %q)", data, taskID, runID)
			}
			if text, _ := at(data, "outputs", "text").(string); !strings.Contains(text, tc.wantText) {
				t.Errorf("outputs %v, want text containing %q", data["outputs"], tc.wantText)
			}
			if errText, _ := data["error"].(string); tc.wantError != "" && !strings.Contains(errText, tc.wantError) {
				t.Errorf("error %q, want it to mention %q", errText, tc.wantError)
			}
			// The run is stored as it ended, with its node executions.
			detail := s.getJSON(t, "/v1/workflows/run/"+runID, s.keys[tc.app])
			if detail["status"] != tc.wantStatus || detail["workflow_id"] != data["workflow_id"] || detail["finished_at"] == nil {
				t.Errorf("detail %v", detail)
			}
			if in, _ := detail["inputs"].(string); !strings.HasPrefix(in, "{") {
				t.Errorf("detail inputs %q, want a JSON text", in)
			}
		})
	}
}

func TestWorkflowRunErrors(t *testing.T) {
	s := newWorkflowServer(t)
	// Learn the greeter's version id from a run.
	rec := s.run(t, "greeter", "/v1/workflows/run", `{"inputs":{"name":"a"},"user":"u"}`)
	expectStatus(t, rec, 200, "")
	version := at(decode(t, rec), "data", "workflow_id").(string)
	unknown := s.run(t, "slow", "/v1/workflows/00000000-0000-4000-8000-000000000000/run", `{"inputs":{},"user":"u"}`)
	expectStatus(t, unknown, 404, "not_found")

	tests := []struct {
		name, key, method, path, body string
		wantStatus                    int
		wantCode                      string
	}{
		{"a chat app cannot run workflows", s.appKey, "POST", "/v1/workflows/run", `{"inputs":{},"user":"u"}`, 400, "not_workflow_app"},
		{"a chat app cannot run a workflow version", s.appKey, "POST", "/v1/workflows/" + version + "/run", `{"inputs":{},"user":"u"}`, 400, "not_workflow_app"},
		{"a chat app has no workflow tasks to stop", s.appKey, "POST", "/v1/workflows/tasks/x/stop", `{"user":"u"}`, 400, "not_workflow_app"},
		{"a chat app has no workflow runs", s.appKey, "GET", "/v1/workflows/run/" + version, "", 400, "not_workflow_app"},
		{"a missing required input is refused before the run", s.keys["greeter"], "POST", "/v1/workflows/run", `{"inputs":{},"user":"u"}`, 400, "invalid_param"},
		{"a streaming run with bad inputs answers with a JSON error", s.keys["greeter"], "POST", "/v1/workflows/run", `{"inputs":{},"user":"u","response_mode":"streaming"}`, 400, "invalid_param"},
		{"a blank user is refused", s.keys["greeter"], "POST", "/v1/workflows/run", `{"inputs":{"name":"a"},"user":"  "}`, 400, "invalid_param"},
		{"an unknown version is not found", s.keys["greeter"], "POST", "/v1/workflows/6f1d2c3b-4a59-4e87-9d6c-5b4a39281706/run", `{"inputs":{"name":"a"},"user":"u"}`, 404, "not_found"},
		{"another app's version is not found", s.keys["failing"], "POST", "/v1/workflows/" + version + "/run", `{"inputs":{},"user":"u"}`, 404, "not_found"},
		{"a malformed version id is a bad request", s.keys["greeter"], "POST", "/v1/workflows/nope/run", `{"inputs":{"name":"a"},"user":"u"}`, 400, "bad_request"},
		{"an unknown run is not found", s.keys["greeter"], "GET", "/v1/workflows/run/6f1d2c3b-4a59-4e87-9d6c-5b4a39281706", "", 404, "not_found"},
		{"stop needs a user", s.keys["greeter"], "POST", "/v1/workflows/tasks/x/stop", `{"user":""}`, 400, "invalid_param"},
		{"stopping an unknown task succeeds quietly", s.keys["greeter"], "POST", "/v1/workflows/tasks/x/stop", `{"user":"u"}`, 200, ""},
		{"logs cannot filter by console account", s.keys["greeter"], "GET", "/v1/workflows/logs?created_by_account=a@b.c", "", 400, "invalid_param"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, request{method: tc.method, path: tc.path, key: tc.key, body: tc.body})
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
		})
	}
}

func TestWorkflowVersions(t *testing.T) {
	s := newWorkflowServer(t)
	runText := func(path string) (version, text string) {
		t.Helper()
		rec := s.run(t, "greeter", path, `{"inputs":{"name":"zoe","n":8},"user":"u"}`)
		expectStatus(t, rec, 200, "")
		body := decode(t, rec)
		v, _ := at(body, "data", "workflow_id").(string)
		out, _ := at(body, "data", "outputs", "text").(string)
		return v, out
	}
	v1, out := runText("/v1/workflows/run")
	if v2, _ := runText("/v1/workflows/run"); v2 != v1 || out != "Big ZOE" {
		t.Fatalf("same definition, versions %s and %s, output %q", v1, v2, out)
	}
	// Replacing the definition makes a new version; the old one still runs
	// its own graph.
	changed := workflowApp("greeter", strings.Replace(greeterGraph, "'Big {{ loud }}'", "'Huge {{ loud }}'", 1))
	if _, err := apps.NewStore(s.db).Replace(context.Background(), s.ids["greeter"], []byte(changed)); err != nil {
		t.Fatal(err)
	}
	v3, out := runText("/v1/workflows/run")
	if v3 == v1 || out != "Huge ZOE" {
		t.Fatalf("after replace: version %s (was %s), output %q", v3, v1, out)
	}
	if v, out := runText("/v1/workflows/" + v1 + "/run"); v != v1 || out != "Big ZOE" {
		t.Errorf("running the first version: version %s, output %q", v, out)
	}
	if v, out := runText("/v1/workflows/" + v3 + "/run"); v != v3 || out != "Huge ZOE" {
		t.Errorf("running the second version: version %s, output %q", v, out)
	}
}

func TestWorkflowLogs(t *testing.T) {
	s := newWorkflowServer(t)
	for i, user := range []string{"alice", "bob", "alice"} {
		expectStatus(t, s.run(t, "greeter", "/v1/workflows/run", fmt.Sprintf(`{"inputs":{"name":"n%d","n":9},"user":"%s"}`, i, user)), 200, "")
	}
	expectStatus(t, s.run(t, "greeter", "/v1/workflows/run", `{"inputs":{"name":"needle","n":9},"user":"carol"}`), 200, "")
	// A run of another app never shows.
	expectStatus(t, s.run(t, "failing", "/v1/workflows/run", `{"inputs":{},"user":"alice"}`), 200, "")

	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	tests := []struct {
		name, query string
		wantTotal   int
		wantLen     int
		wantMore    bool
	}{
		{"every run, newest first", "", 4, 4, false},
		{"first page of two", "?limit=2", 4, 2, true},
		{"second page of two", "?limit=2&page=2", 4, 2, false},
		{"a page past the end is empty", "?limit=2&page=3", 4, 0, false},
		{"by end user", "?created_by_end_user_session_id=alice", 2, 2, false},
		{"by keyword in the inputs", "?keyword=needle", 1, 1, false},
		{"by keyword in the user", "?keyword=caro", 1, 1, false},
		{"by status", "?status=succeeded", 4, 4, false},
		{"no stopped runs", "?status=stopped", 0, 0, false},
		{"created before now", "?created_at__before=" + future, 4, 4, false},
		{"created before an hour ago", "?created_at__before=" + past, 0, 0, false},
		{"created after an hour ago", "?created_at__after=" + past, 4, 4, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := s.getJSON(t, "/v1/workflows/logs"+tc.query, s.keys["greeter"])
			data, _ := body["data"].([]any)
			if int(body["total"].(float64)) != tc.wantTotal || len(data) != tc.wantLen || body["has_more"] != tc.wantMore {
				t.Fatalf("total %v, %d entries, has_more %v; want %d, %d, %v", body["total"], len(data), body["has_more"], tc.wantTotal, tc.wantLen, tc.wantMore)
			}
			for _, d := range data {
				if at(d, "workflow_run", "status") == nil || at(d, "created_by_end_user", "session_id") == nil {
					t.Errorf("entry %v", d)
				}
			}
		})
	}
	failed := s.getJSON(t, "/v1/workflows/logs?status=failed", s.keys["failing"])
	if failed["total"].(float64) != 1 || at(failed, "data", 0, "workflow_run", "error") == nil {
		t.Errorf("failed runs: %v", failed)
	}
}

func TestWorkflowStop(t *testing.T) {
	s := newWorkflowServer(t)
	srv := httptest.NewServer(s.e)
	defer srv.Close()
	body := `{"inputs":{},"user":"alice","response_mode":"streaming"}`
	req, err := http.NewRequest("POST", srv.URL+"/v1/workflows/run", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.keys["slow"])
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	r := bufio.NewReader(res.Body)
	first := firstFrame(t, r)
	if first.str("event") != "workflow_started" {
		t.Fatalf("first event %v", first)
	}
	// Wait until the spinning node has started, then stop the run; the
	// contract lets any user of the app do that.
	var frames = []frame{first}
	for {
		f := firstFrame(t, r)
		frames = append(frames, f)
		if f.str("event") == "node_started" && at(map[string]any(f), "data", "node_id") == "spin" {
			break
		}
	}
	started := time.Now()
	rec := s.do(t, request{method: "POST", path: "/v1/workflows/tasks/" + first.str("task_id") + "/stop", key: s.keys["slow"], body: `{"user":"bob"}`})
	expectStatus(t, rec, 200, "")
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(started); d > 5*time.Second {
		t.Errorf("the run took %s to stop", d)
	}
	frames = append(frames, readFrames(t, string(rest))...)
	end := checkWorkflowStream(t, frames)
	if at(map[string]any(end), "data", "status") != "stopped" {
		t.Errorf("finished with %v", end["data"])
	}
	var raw strings.Builder
	for _, f := range frames {
		raw.WriteString("data: " + mustJSON(t, f) + "\n\n")
	}
	checkLive(t, &chatServer{testServer: s.testServer}, request{method: "POST", path: "/v1/workflows/run", key: s.keys["slow"], body: body}, res, []byte(raw.String()))
	detail := s.getJSON(t, "/v1/workflows/run/"+first.str("workflow_run_id"), s.keys["slow"])
	if detail["status"] != "stopped" {
		t.Errorf("stored status %v", detail["status"])
	}
}

// TestWorkflowKnowledgeRetrieval runs a workflow whose knowledge-retrieval
// node searches a real knowledge base, and checks the chunk reaches the end.
func TestWorkflowKnowledgeRetrieval(t *testing.T) {
	s := newTestServer(t)
	ds := retrieveCorpus(t, s, "handbook")
	graph := `    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: q, label: Q, type: text-input, required: true}]}
    - id: kr
      data: {type: knowledge-retrieval, title: Search, query_variable_selector: [start, q], dataset_ids: [` + ds + `],
        retrieval_mode: multiple, multiple_retrieval_config: {top_k: 1, reranking_enable: false}}
    - id: end
      data: {type: end, title: End, outputs: [{variable: found, value_selector: [kr, result]}]}
    edges:
    - {source: start, sourceHandle: source, target: kr}
    - {source: kr, sourceHandle: source, target: end}
`
	_, key := s.importText(t, workflowApp("searcher", graph))
	rec := s.do(t, request{method: "POST", path: "/v1/workflows/run", key: key,
		body: `{"inputs":{"q":"how long do refunds take"},"user":"u1","response_mode":"blocking"}`})
	expectStatus(t, rec, 200, "")
	if !strings.Contains(rec.Body.String(), "Refunds are paid back within five days.") {
		t.Errorf("the retrieved chunk is not in the outputs: %s", rec.Body)
	}
}

// TestWorkflowHTTPRequestGuard runs an http-request node against a loopback
// server: the SSRF guard refuses it unless --fetch-allow names loopback.
func TestWorkflowHTTPRequestGuard(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the test server")
	}))
	defer target.Close()
	graph := `    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: fetch
      data: {type: http-request, title: Fetch, method: get, url: '` + target.URL + `/hello'}
    - id: end
      data: {type: end, title: End, outputs: [{variable: body, value_selector: [fetch, body]}]}
    edges:
    - {source: start, sourceHandle: source, target: fetch}
    - {source: fetch, sourceHandle: source, target: end}
`
	tests := []struct {
		name  string
		allow []netip.Prefix
		want  string
	}{
		{"loopback is refused by default", nil, `"status":"failed"`},
		{"the allowlist lets it through", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, "hello from the test server"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newMediaServer(t, nil, func(d *handlers.Deps) { d.FetchAllow = tc.allow })
			_, key := s.importText(t, workflowApp("fetcher", graph))
			rec := s.do(t, request{method: "POST", path: "/v1/workflows/run", key: key,
				body: `{"inputs":{},"user":"u1","response_mode":"blocking"}`})
			expectStatus(t, rec, 200, "")
			if !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("want %s in %s", tc.want, rec.Body)
			}
		})
	}
}
