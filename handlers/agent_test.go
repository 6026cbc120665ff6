package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"appkb/internal/apps"
	"appkb/internal/platform/netguard"
	"appkb/internal/run/tools"
	"appkb/internal/run/tools/toolstest"
)

// agentApp is an agent-chat app whose tools come from every source: the
// built-in time tools, an MCP server, an OpenAPI service and a workflow.
const agentApp = `app: {mode: agent-chat, name: Helper}
kind: app
version: 0.3.0
model_config:
  model: {provider: langgenius/openai/openai, name: gpt-4o, mode: chat, completion_params: {}}
  pre_prompt: Use your tools.
  agent_mode:
    enabled: true
    strategy: function_call
    max_iteration: MAXITER
    tools:
    - {enabled: true, provider_type: builtin, provider_id: time, provider_name: time, tool_name: timestamp_to_localtime, tool_label: Local time, tool_parameters: {timezone: UTC}}
    - {enabled: true, provider_type: mcp, provider_id: calc, provider_name: calc, tool_name: add, tool_label: Add, tool_parameters: {}}
    - {enabled: true, provider_type: mcp, provider_id: calc, provider_name: calc, tool_name: picture, tool_label: Picture, tool_parameters: {}}
    - {enabled: true, provider_type: mcp, provider_id: calc, provider_name: calc, tool_name: fail, tool_label: Fail, tool_parameters: {}}
    - {enabled: true, provider_type: mcp, provider_id: calc, provider_name: calc, tool_name: slow, tool_label: Slow, tool_parameters: {}}
    - {enabled: true, provider_type: api, provider_id: 0d6e, provider_name: weather, tool_name: getWeather, tool_label: Weather, tool_parameters: {}}
    - {enabled: true, provider_type: workflow, provider_id: 5b1c, provider_name: greeter, tool_name: greet, tool_label: Greet, tool_parameters: {}}
    - {enabled: false, provider_type: mcp, provider_id: down, provider_name: down, tool_name: add, tool_parameters: {}}
  user_input_form: []
`

// greeterWorkflow is the workflow app the workflow tool runs.
const greeterWorkflow = `app: {mode: workflow, name: Greeter}
kind: app
version: 0.3.0
workflow:
  graph:
    edges:
    - {id: e1, source: start, sourceHandle: source, target: tpl, targetHandle: target}
    - {id: e2, source: tpl, sourceHandle: source, target: end, targetHandle: target}
    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: name, label: Name, type: text-input, required: true}]}
    - id: tpl
      data: {type: template-transform, title: Greeting, template: 'Hello, {{ name }}!', variables: [{variable: name, value_selector: [start, name]}]}
    - id: end
      data: {type: end, title: End, outputs: [{variable: greeting, value_selector: [tpl, output]}]}
`

// chatflowAgent is a chatflow whose agent node uses the MCP agent
// strategy, its servers in mcp_servers_config, plus a built-in tool.
const chatflowAgent = `app: {mode: advanced-chat, name: MCP agent}
kind: app
version: 0.3.0
workflow:
  graph:
    edges:
    - {id: e1, source: start, sourceHandle: source, target: agent, targetHandle: target}
    - {id: e2, source: agent, sourceHandle: source, target: answer, targetHandle: target}
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: agent
      data:
        type: agent
        title: Agent
        agent_strategy_provider_name: hjlarry/agent/mcp_agent
        agent_strategy_name: mcp_sse_function_calling
        plugin_unique_identifier: 'hjlarry/agent:0.0.1@x'
        agent_parameters:
          model: {type: constant, value: {provider: langgenius/openai/openai, model: gpt-4o, type: model-selector}}
          tools: {type: constant, value: [{enabled: true, provider_name: time, tool_name: timestamp_to_localtime, type: builtin, parameters: {timezone: {auto: 0, value: UTC}}},
            {enabled: true, provider_name: weather, tool_name: getWeather, type: api},
            {enabled: true, provider_name: greeter, tool_name: greet, type: workflow}]}
          mcp_servers_config: {type: constant, value: 'MCPCONFIG'}
          query: {type: constant, value: '{{#sys.query#}}'}
          maximum_iterations: {type: constant, value: 5}
    - id: answer
      data: {type: answer, title: Answer, answer: '{{#agent.text#}}'}
`

// agentServer starts the tool servers and a server whose tools file maps
// calc, weather and greeter to them.
func agentServer(t *testing.T, maxIter string) (*chatServer, string) {
	t.Helper()
	mcpSrv := toolstest.MCP(t)
	_, schema := toolstest.OpenAPI(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "weather.yaml"), []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.yaml"), []byte(`providers:
  calc: {type: mcp, url: "`+mcpSrv.URL+`/mcp", headers: {X-Test-Key: "`+toolstest.MCPKey+`"}, timeout: 0.5}
  down: {type: mcp, url: "http://127.0.0.1:1/mcp", timeout: 1}
  weather: {type: openapi, schema: weather.yaml, auth: {type: header, name: X-Api-Key, value: `+toolstest.WeatherKey+`}}
  greeter: {type: workflow, app_id: PLACEHOLDER, parameters: [{name: name, type: string, required: true}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := tools.LoadConfig(filepath.Join(dir, "tools.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry(cfg, &netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	mcpConfig, _ := json.Marshal(map[string]any{"calc": map[string]any{"url": mcpSrv.URL + "/mcp", "headers": map[string]any{"X-Test-Key": toolstest.MCPKey}, "timeout": 5}})
	s := newChatServer(t, chatOptions{tools: reg, extra: map[string]string{
		"helper":  strings.Replace(agentApp, "MAXITER", maxIter, 1),
		"mcpflow": strings.Replace(chatflowAgent, "MCPCONFIG", string(mcpConfig), 1),
		"mcpdown": strings.Replace(chatflowAgent, "MCPCONFIG", `{"mcpServers": {"gone": {"url": "http://127.0.0.1:1/sse", "timeout": 2}}}`, 1),
		"helperdown": strings.Replace(strings.Replace(agentApp, "MAXITER", maxIter, 1),
			"enabled: false, provider_type: mcp, provider_id: down", "enabled: true, provider_type: mcp, provider_id: down", 1),
	}})
	greeter, err := apps.NewStore(s.db).Import(context.Background(), []byte(greeterWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Providers["greeter"].AppID = greeter.ID
	return s, mcpSrv.URL
}

func TestAgentAppCallsTools(t *testing.T) {
	s, _ := agentServer(t, "8")
	query := `timestamp_to_localtime {"timestamp": 0} then add {"a": 2, "b": 3} then getWeather {"city": "Paris"} then greet {"name": "Ann"} then picture {} then fail {} then slow {}`
	body, _ := json.Marshal(map[string]any{"query": query, "inputs": map[string]any{}, "user": "u1", "response_mode": "streaming"})
	rec := s.post(t, "helper", "/v1/chat-messages", string(body))
	expectStatus(t, rec, 200, "")
	frames := readFrames(t, rec.Body.String())
	answer, end := checkStream(t, frames, true)

	wantObs := []struct{ tool, obs string }{
		{"timestamp_to_localtime", "1970-01-01 00:00:00"},
		{"add", "5"},
		{"getWeather", `{"city":"Paris","sky":"sunny","temperature":21,"unit":"C"}`},
		{"greet", "Hello, Ann!"},
		{"picture", "Files made: image-1.png"},
		{"fail", "Error: the MCP tool fail reported an error: the disk is on fire."},
		{"slow", "Error: the MCP tool slow did not answer within 500ms."},
	}
	var lines []string
	for _, w := range wantObs {
		lines = append(lines, w.tool+": "+w.obs)
	}
	if answer != strings.Join(lines, "\n") {
		t.Errorf("answer\n%s\nwant\n%s", answer, strings.Join(lines, "\n"))
	}
	// Each tool round sends its thought twice, the second time with the
	// observation; the final round once; then one message_file for the
	// picture.
	var thoughts, files []frame
	for _, f := range frames {
		switch f.str("event") {
		case "agent_thought":
			thoughts = append(thoughts, f)
		case "message_file":
			files = append(files, f)
		}
	}
	if len(thoughts) != 2*len(wantObs)+1 {
		t.Fatalf("%d agent_thought events, want %d", len(thoughts), 2*len(wantObs)+1)
	}
	for i, w := range wantObs {
		first, done := thoughts[2*i], thoughts[2*i+1]
		if first.str("id") != done.str("id") || done["position"] != float64(i+1) || done.str("tool") != w.tool {
			t.Errorf("round %d: %v then %v", i+1, first, done)
		}
		var obs map[string]string
		if err := json.Unmarshal([]byte(done.str("observation")), &obs); err != nil || obs[w.tool] != w.obs {
			t.Errorf("round %d observation %q, want %q", i+1, done.str("observation"), w.obs)
		}
		if first.str("observation") != "" || done.str("tool_input") == "" {
			t.Errorf("round %d: first %v, done %v", i+1, first, done)
		}
	}
	if len(files) != 1 || files[0].str("belongs_to") != "assistant" || files[0].str("type") != "image" {
		t.Fatalf("message_file events %v", files)
	}
	if ids, _ := thoughts[9]["message_files"].([]any); len(ids) != 1 || ids[0] != files[0].str("id") {
		t.Errorf("the picture round names its file: %v", thoughts[9])
	}

	// The thoughts and the file are stored with the message.
	hist := s.do(t, request{method: "GET", path: "/v1/messages?user=u1&conversation_id=" + end.str("conversation_id"), key: s.keys["helper"]})
	expectStatus(t, hist, 200, "")
	var page struct {
		Data []struct {
			AgentThoughts []map[string]any `json:"agent_thoughts"`
			MessageFiles  []map[string]any `json:"message_files"`
			Answer        string           `json:"answer"`
		} `json:"data"`
	}
	if err := json.Unmarshal(hist.Body.Bytes(), &page); err != nil || len(page.Data) != 1 {
		t.Fatalf("history %s", hist.Body)
	}
	m := page.Data[0]
	if len(m.AgentThoughts) != len(wantObs)+1 || m.AgentThoughts[1]["tool"] != "add" || m.AgentThoughts[1]["tool_input"] != `{"add":{"a":2,"b":3}}` {
		t.Errorf("stored thoughts %v", m.AgentThoughts)
	}
	if labels, _ := m.AgentThoughts[1]["tool_labels"].(map[string]any); labels["add"] == nil {
		t.Errorf("tool labels %v", m.AgentThoughts[1]["tool_labels"])
	}
	if len(m.MessageFiles) != 1 || m.MessageFiles[0]["belongs_to"] != "assistant" || m.MessageFiles[0]["id"] != files[0].str("id") {
		t.Errorf("stored files %v", m.MessageFiles)
	}
	if m.Answer != answer {
		t.Errorf("stored answer %q", m.Answer)
	}
}

func TestAgentAppLimits(t *testing.T) {
	s, _ := agentServer(t, "2")
	tests := []struct {
		name, app, query string
		wantAnswer       string
		wantError        string // in an error event
	}{
		{name: "the iteration limit leaves the model to answer without tools", app: "helper",
			query:      `add {"a": 1, "b": 1} then add... greet {"name": "B"} then getWeather {"city": "Rome"}`,
			wantAnswer: "add: 2\ngreet: Hello, B!"},
		// As in Dify, a tool that cannot be loaded is left out and the agent
		// answers with the others (a warning is logged once per app).
		{name: "a tool on an MCP server that is down is left out, the others still work", app: "helperdown",
			query: `add {"a": 2, "b": 2} then greet {"name": "C"}`, wantAnswer: "add: 4\ngreet: Hello, C!"},
		{name: "an unmapped tool is left out and the agent still answers", app: appAgent, query: "hi", wantAnswer: "ANY"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"query": tc.query, "inputs": map[string]any{}, "user": "u1", "response_mode": "streaming"})
			rec := s.post(t, tc.app, "/v1/chat-messages", string(body))
			expectStatus(t, rec, 200, "")
			frames := readFrames(t, rec.Body.String())
			if tc.wantError != "" {
				last := frames[len(frames)-1]
				if last.str("event") != "error" || !strings.Contains(last.str("message"), tc.wantError) {
					t.Fatalf("last event %v, want an error with %q", last, tc.wantError)
				}
				return
			}
			answer, _ := checkStream(t, frames, true)
			if tc.wantAnswer == "ANY" && answer != "" {
				return
			}
			if answer != tc.wantAnswer {
				t.Errorf("answer %q, want %q", answer, tc.wantAnswer)
			}
		})
	}
}

func TestChatflowMCPAgent(t *testing.T) {
	s, _ := agentServer(t, "5")
	body, _ := json.Marshal(map[string]any{"query": `add {"a": 20, "b": 22} then timestamp_to_localtime {"timestamp": 86400} then getWeather {"city": "Oslo"} then greet {"name": "Bo"}`, "inputs": map[string]any{}, "user": "u1", "response_mode": "streaming"})
	rec := s.post(t, "mcpflow", "/v1/chat-messages", string(body))
	expectStatus(t, rec, 200, "")
	frames := readFrames(t, rec.Body.String())
	answer, _ := checkChatflowStream(t, frames)
	if want := "add: 42\ntimestamp_to_localtime: 1970-01-02 00:00:00\n" +
		`getWeather: {"city":"Oslo","sky":"sunny","temperature":21,"unit":"C"}` + "\ngreet: Hello, Bo!"; answer != want {
		t.Errorf("answer %q, want %q", answer, want)
	}
	var calls []string
	for _, f := range frames {
		if f.str("event") != "agent_log" {
			continue
		}
		data, _ := f["data"].(map[string]any)
		if label, _ := data["label"].(string); strings.HasPrefix(label, "CALL ") {
			calls = append(calls, label+":"+data["status"].(string))
		}
	}
	if strings.Join(calls, ",") != "CALL add:success,CALL timestamp_to_localtime:success,CALL getWeather:success,CALL greet:success" {
		t.Errorf("tool calls %v", calls)
	}

	// An MCP server that is down fails the node, naming the server.
	rec = s.post(t, "mcpdown", "/v1/chat-messages", string(body))
	expectStatus(t, rec, 200, "")
	frames = readFrames(t, rec.Body.String())
	var failed frame
	for _, f := range frames {
		if f.str("event") == "workflow_finished" {
			failed, _ = f["data"].(map[string]any)
		}
	}
	if failed.str("status") != "failed" || !strings.Contains(failed.str("error"), `cannot use the MCP server "gone": the MCP server http://127.0.0.1:1/sse cannot be reached`) {
		t.Errorf("workflow_finished %v", failed)
	}
}

// TestAgentMissingToolWarnsOnce: an agent app whose tool cannot be loaded
// answers on every request, and the server warns about that tool once.
func TestAgentMissingToolWarnsOnce(t *testing.T) {
	var logs syncBuffer
	s := newChatServer(t, chatOptions{log: &logs})
	for range 3 {
		rec := s.post(t, appAgent, "/v1/chat-messages", `{"query":"hi","inputs":{},"user":"u1","response_mode":"streaming"}`)
		expectStatus(t, rec, 200, "")
		if answer, _ := checkStream(t, readFrames(t, rec.Body.String()), true); answer == "" {
			t.Error("no answer")
		}
	}
	if n := strings.Count(logs.String(), "tool=tavily_search"); n != 1 {
		t.Errorf("%d warnings about the missing tool, want 1:\n%s", n, logs.String())
	}
}

// syncBuffer is a bytes.Buffer that the server's goroutines may write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
