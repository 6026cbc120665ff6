//go:build reliability

package reliability

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"appkb/internal/run/tools"
	"appkb/internal/run/tools/toolstest"
)

// bigToolWorkflow runs the test MCP server's big tool for BYTES characters
// and ends with its text.
const bigToolWorkflow = `app: {mode: workflow, name: Big tool}
kind: app
version: 0.3.0
workflow:
  graph:
    edges:
    - {id: e1, source: start, sourceHandle: source, target: tool, targetHandle: target}
    - {id: e2, source: tool, sourceHandle: source, target: end, targetHandle: target}
    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: n, label: N, type: number, required: true}]}
    - id: tool
      data: {type: tool, title: Big, provider_id: calc, provider_name: calc, provider_type: mcp, tool_name: big,
        tool_parameters: {bytes: {type: variable, value: [start, n]}}}
    - id: end
      data: {type: end, title: End, outputs: [{variable: text, value_selector: [tool, text]}]}
`

// A huge MCP answer costs the real server little: one just under the
// read limit is cut to tools.MaxToolText and stored about twice (the tool
// node's record and the run's outputs), one of 200 MB is refused at the
// limit. The server's memory grows by tens of MB, not by the answer.
func TestLargeMCPAnswer(t *testing.T) {
	mcpSrv := toolstest.MCP(t)
	dir := t.TempDir()
	toolsFile := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(toolsFile, []byte(`providers:
  calc: {type: mcp, url: "`+mcpSrv.URL+`/mcp", headers: {X-Test-Key: "`+toolstest.MCPKey+`"}, timeout: 60}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	key := importApp(t, dir, bigToolWorkflow)
	s := start(t, dir, "--tools", toolsFile, "--fetch-allow", "127.0.0.1/32")
	dbSize := func() int64 {
		var n int64
		for _, name := range []string{"appkb.db", "appkb.db-wal"} {
			if st, err := os.Stat(filepath.Join(dir, name)); err == nil {
				n += st.Size()
			}
		}
		return n
	}
	cases := []struct {
		name   string
		bytes  int
		runs   int
		status string
	}{
		{"answers just under the read limit", tools.MaxAnswerBytes - 64<<10, 5, "succeeded"},
		{"answers of 200 MB", 200 << 20, 2, "failed"},
	}
	for _, tc := range cases {
		rss, db := s.rss("VmRSS"), dbSize()
		for i := 0; i < tc.runs; i++ {
			var out struct {
				Data struct {
					Status  string         `json:"status"`
					Error   *string        `json:"error"`
					Outputs map[string]any `json:"outputs"`
				} `json:"data"`
			}
			code, err := s.call("POST", "/workflows/run", key, map[string]any{
				"inputs": map[string]any{"n": tc.bytes}, "user": "u1", "response_mode": "blocking"}, &out)
			if err != nil || code != 200 {
				t.Fatalf("%s: %d %v", tc.name, code, err)
			}
			if out.Data.Status != tc.status {
				t.Fatalf("%s: status %s (%v), want %s", tc.name, out.Data.Status, out.Data.Error, tc.status)
			}
			if tc.status == "failed" && (out.Data.Error == nil || !strings.Contains(*out.Data.Error, "larger than")) {
				t.Fatalf("%s: error %v, want the answer refused as too large", tc.name, out.Data.Error)
			}
			if text, _ := out.Data.Outputs["text"].(string); tc.status == "succeeded" && len(text) > tools.MaxToolText+100 {
				t.Fatalf("%s: %d bytes of text", tc.name, len(text))
			}
		}
		grew, dbGrew := s.rss("VmRSS")-rss, dbSize()-db
		t.Logf("%s, %d runs: RSS %+d MB (peak %d MB), database files %+d KB (%s per run)",
			tc.name, tc.runs, grew>>20, s.rss("VmHWM")>>20, dbGrew>>10, strconv.FormatFloat(float64(dbGrew)/float64(tc.runs)/(1<<20), 'f', 1, 64)+" MiB")
		if grew > 200<<20 {
			t.Errorf("%s: the server grew by %d MB", tc.name, grew>>20)
		}
	}
}
