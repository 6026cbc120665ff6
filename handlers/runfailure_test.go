package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFailuresInsideRuns: what fails inside a run is an outcome of the run,
// answered as Dify answers it. A workflow app's blocking run is a 200 whose
// run has status failed; a chatflow's is a 400 invalid_param "Run failed:
// …" (Dify raises the run's error as a ValueError), and its stream ends
// with workflow_finished (failed) and then an error event of that code.
func TestFailuresInsideRuns(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("secret")) }))
	defer target.Close()
	codeNode := `{type: code, title: Boom, code_language: javascript, code: 'function main() { throw new Error("kaboom") }', outputs: {}}`
	httpNode := `{type: http-request, title: Fetch, method: get, url: '` + target.URL + `/x'}`
	graph := func(mode, node string) string {
		last := `{type: end, title: End, outputs: []}`
		if mode == "advanced-chat" {
			last = `{type: answer, title: Answer, answer: 'done'}`
		}
		return `app: {mode: ` + mode + `, name: Failing}
kind: app
version: 0.3.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: bad
      data: ` + node + `
    - id: last
      data: ` + last + `
    edges:
    - {source: start, sourceHandle: source, target: bad}
    - {source: bad, sourceHandle: source, target: last}
`
	}
	tests := []struct {
		name, mode, node, want string
	}{
		{"code node throws", "advanced-chat", codeNode, "kaboom"},
		{"http-request node refused by the SSRF guard", "advanced-chat", httpNode, ""},
		{"workflow: code node throws", "workflow", codeNode, "kaboom"},
		{"workflow: http-request node refused", "workflow", httpNode, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newMediaServer(t, nil)
			_, key := s.importText(t, graph(tc.mode, tc.node))
			path, body := "/v1/chat-messages", `{"query":"go","inputs":{},"user":"u1"`
			if tc.mode == "workflow" {
				path, body = "/v1/workflows/run", `{"inputs":{},"user":"u1"`
			}
			rec := s.do(t, request{method: "POST", path: path, key: key, body: body + `,"response_mode":"blocking"}`})
			if tc.mode == "workflow" {
				expectStatus(t, rec, 200, "")
				var out struct {
					Data struct{ Status, Error string } `json:"data"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Data.Status != "failed" || !strings.Contains(out.Data.Error, tc.want) {
					t.Fatalf("blocking answer %s", rec.Body)
				}
				return
			}
			expectStatus(t, rec, 400, "invalid_param")
			var e struct{ Message string }
			json.Unmarshal(rec.Body.Bytes(), &e)
			if !strings.HasPrefix(e.Message, "Run failed: ") || !strings.Contains(e.Message, tc.want) {
				t.Errorf("message %q", e.Message)
			}

			rec = s.do(t, request{method: "POST", path: path, key: key, body: body + `,"response_mode":"streaming"}`})
			expectStatus(t, rec, 200, "")
			frames := readFrames(t, rec.Body.String())
			if len(frames) < 2 {
				t.Fatalf("frames %v", frames)
			}
			finished, last := frames[len(frames)-2], frames[len(frames)-1]
			data, _ := finished["data"].(map[string]any)
			if finished.str("event") != "workflow_finished" || data["status"] != "failed" {
				t.Errorf("next to last frame %v", finished)
			}
			if last.str("event") != "error" || last.str("code") != "invalid_param" || last["status"] != float64(400) ||
				!strings.HasPrefix(last.str("message"), "Run failed: ") {
				t.Errorf("last frame %v", last)
			}
		})
	}
}
