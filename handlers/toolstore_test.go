package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gorm.io/gorm"

	"appkb/internal/platform/netguard"
	"appkb/internal/run/tools"
	"appkb/internal/run/tools/toolstest"
)

// bigAgentApp is an agent app with the test MCP server's two large tools.
const bigAgentApp = `app: {mode: agent-chat, name: Big agent}
kind: app
version: 0.3.0
model_config:
  model: {provider: langgenius/openai/openai, name: gpt-4o, mode: chat, completion_params: {}}
  pre_prompt: Use your tools.
  agent_mode:
    enabled: true
    strategy: function_call
    max_iteration: 3
    tools:
    - {enabled: true, provider_type: mcp, provider_id: calc, provider_name: calc, tool_name: big, tool_label: Big, tool_parameters: {}}
    - {enabled: true, provider_type: mcp, provider_id: calc, provider_name: calc, tool_name: bigjson, tool_label: Big JSON, tool_parameters: {}}
  user_input_form: []
`

// bigToolFlow is a workflow (or, with MODE advanced-chat, a chatflow)
// whose tool node calls TOOL of the test MCP server for BYTES characters
// and hands its text on to the end (or answer) node.
const bigToolFlow = `app: {mode: MODE, name: Big tool}
kind: app
version: 0.3.0
workflow:
  graph:
    edges:
    - {id: e1, source: start, sourceHandle: source, target: tool, targetHandle: target}
    - {id: e2, source: tool, sourceHandle: source, target: last, targetHandle: target}
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: tool
      data: {type: tool, title: Big, provider_id: calc, provider_name: calc, provider_type: mcp, tool_name: TOOL,
        tool_parameters: {bytes: {type: constant, value: BYTES}}}
    - id: last
      data: LAST
`

const (
	bigEnd    = `{type: end, title: End, outputs: [{variable: text, value_selector: [tool, text]}]}`
	bigAnswer = `{type: answer, title: Answer, answer: '{{#tool.text#}}'}`
)

// tableBytes sums the size of every value in every table: what the rows
// hold, without the engine's pages and indexes.
func tableBytes(t *testing.T, gdb *gorm.DB) map[string]int64 {
	t.Helper()
	names, err := gdb.Migrator().GetTables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, name := range names {
		rows, err := gdb.Raw(`SELECT * FROM "` + name + `"`).Rows()
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				switch x := v.(type) {
				case nil:
				case []byte:
					out[name] += int64(len(x))
				case string:
					out[name] += int64(len(x))
				default:
					out[name] += int64(len(fmt.Sprint(x)))
				}
			}
		}
		rows.Close()
	}
	return out
}

// grown is what after holds more than before, table by table, and the sum.
func grown(before, after map[string]int64) (map[string]int64, int64) {
	d := map[string]int64{}
	var sum int64
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			d[k] = n
			sum += n
		}
	}
	return d, sum
}

func describe(d map[string]int64) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if d[k] >= 1024 {
			parts = append(parts, fmt.Sprintf("%s %d KB", k, d[k]/1024))
		}
	}
	return strings.Join(parts, ", ")
}

// procKB reads one field (VmRSS, VmHWM) of /proc/self/status in KB.
func procKB(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// One large MCP answer (just under the read limit) through an agent app,
// a workflow's tool node and a chatflow's: the text is cut to
// tools.MaxToolText before anything stores it, and each answer lands in
// the database about once, not once per record that mentions it.
func TestLargeToolAnswerStoredOnce(t *testing.T) {
	mcpSrv := toolstest.MCP(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tools.yaml"), []byte(`providers:
  calc: {type: mcp, url: "`+mcpSrv.URL+`/mcp", headers: {X-Test-Key: "`+toolstest.MCPKey+`"}, timeout: 20}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := tools.LoadConfig(filepath.Join(dir, "tools.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry(cfg, &netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	// Under tools.MaxAnswerBytes once JSON-RPC wraps it.
	const answerBytes = tools.MaxAnswerBytes - 64<<10
	// The structured tool sends its object twice (as structured content
	// and as text), so it may hold half as much.
	const halfBytes = answerBytes/2 - 64<<10
	flow := func(mode, tool, last string) string {
		n := answerBytes
		if tool == "bigjson" {
			n = halfBytes
		}
		r := strings.NewReplacer("MODE", mode, "TOOL", tool, "BYTES", strconv.Itoa(n), "LAST", last)
		return r.Replace(bigToolFlow)
	}
	s := newChatServer(t, chatOptions{tools: reg, extra: map[string]string{
		"bigagent":    bigAgentApp,
		"bigflow":     flow("workflow", "big", bigEnd),
		"bigjsonflow": flow("workflow", "bigjson", bigEnd),
		"bigchatflow": flow("advanced-chat", "big", bigAnswer),
	}})
	chat := func(q, mode string) string {
		b, _ := json.Marshal(map[string]any{"query": q, "inputs": map[string]any{}, "user": "u1", "response_mode": mode})
		return string(b)
	}
	run := `{"inputs": {}, "user": "u1", "response_mode": "blocking"}`
	cases := []struct {
		name, app, path, body string
		// most bytes the rows may grow by (the run's outputs and a
		// chatflow's answer are whole copies the API returns)
		limit int64
	}{
		{"agent app, text", "bigagent", "/v1/chat-messages", chat(fmt.Sprintf(`big {"bytes": %d}`, answerBytes), "streaming"), 400 << 10},
		{"agent app, structured", "bigagent", "/v1/chat-messages", chat(fmt.Sprintf(`bigjson {"bytes": %d}`, halfBytes), "streaming"), 400 << 10},
		{"workflow tool node, text", "bigflow", "/v1/workflows/run", run, 2*tools.MaxToolText + 64<<10},
		{"workflow tool node, structured", "bigjsonflow", "/v1/workflows/run", run, 2*tools.MaxToolText + 64<<10},
		{"chatflow tool node", "bigchatflow", "/v1/chat-messages", chat("go", "blocking"), 3*tools.MaxToolText + 64<<10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GC()
			before := tableBytes(t, s.db)
			rss := procKB("VmRSS")
			_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM
			rec := s.post(t, tc.app, tc.path, tc.body)
			expectStatus(t, rec, 200, "")
			if strings.Contains(rec.Body.String(), `"status":"failed"`) || strings.Contains(rec.Body.String(), "Error: ") {
				t.Fatalf("the tool failed: %.500s", rec.Body.String())
			}
			peak := procKB("VmHWM") - rss
			d, sum := grown(before, tableBytes(t, s.db))
			// On PostgreSQL the run's events are logged too (for followers
			// on other replicas, until pruned): held to the same bound.
			events := d["run_events"]
			sum -= events
			t.Logf("%s: rows +%d KB (%.1f × the text cap: %s), response %d KB, peak RSS +%d MB",
				tc.name, (sum+events)/1024, float64(sum+events)/tools.MaxToolText, describe(d), rec.Body.Len()/1024, peak/1024)
			if sum > tc.limit {
				t.Errorf("rows grew by %d bytes, want at most %d", sum, tc.limit)
			}
			if events > tc.limit {
				t.Errorf("run events grew by %d bytes, want at most %d", events, tc.limit)
			}
			// The node records hold the text once: the end or answer
			// node keeps a preview of it.
			if n := d["workflow_node_executions"]; n > tools.MaxToolText+32<<10 {
				t.Errorf("node records grew by %d bytes, want the text once (%d)", n, tools.MaxToolText)
			}
			// What the API answers still carries the whole (cut) text.
			if tc.path != "/v1/workflows/run" {
				return
			}
			var body struct {
				Data struct {
					Outputs map[string]any `json:"outputs"`
				} `json:"data"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			text, _ := body.Data.Outputs["text"].(string)
			if len(text) < tools.MaxToolText || !strings.Contains(text, "[truncated") {
				t.Errorf("run outputs hold %d bytes of text, want the cut text whole", len(text))
			}
		})
	}
}
