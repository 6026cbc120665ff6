package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"appkb/internal/llm"
)

// scriptedModel is a chat model whose answers a test writes: reply gets
// the number of the call (from 0) and the request.
type scriptedModel struct {
	mu    sync.Mutex
	reqs  []llm.ChatRequest
	reply func(n int, req llm.ChatRequest) *llm.ChatResponse
}

func (m *scriptedModel) Chat(_ context.Context, req llm.ChatRequest) (*llm.ChatResponse, error) {
	m.mu.Lock()
	n := len(m.reqs)
	req.Messages = slices.Clone(req.Messages)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.reply(n, req), nil
}

func (m *scriptedModel) Stream(ctx context.Context, req llm.ChatRequest, onChunk func(llm.Chunk) error) (*llm.ChatResponse, error) {
	resp, err := m.Chat(ctx, req)
	if err == nil && onChunk != nil && resp.Content != "" {
		err = onChunk(llm.Chunk{Delta: resp.Content})
	}
	return resp, err
}

// scriptedSource hands out one model and remembers what was asked for.
type scriptedSource struct {
	model llm.ChatModel
	mu    sync.Mutex
	asked []string
}

func (s *scriptedSource) Chat(provider, model string) (llm.ChatModel, error) {
	s.mu.Lock()
	s.asked = append(s.asked, provider+"|"+model)
	s.mu.Unlock()
	return s.model, nil
}

func tokenUsage(n int) llm.Usage {
	return llm.Usage{PromptTokens: n - 1, CompletionTokens: 1, TotalTokens: n}
}

// callReply asks for one tool call.
func callReply(id, name, args string) *llm.ChatResponse {
	return &llm.ChatResponse{ToolCalls: []llm.ToolCall{{ID: id, Name: name, Arguments: args}}, FinishReason: "tool_calls", Usage: tokenUsage(10)}
}

// lastTool is the content of the last tool message of a request.
func lastTool(req llm.ChatRequest) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleTool {
			return req.Messages[i].Content
		}
	}
	return ""
}

// agentNode writes an agent node with the given tools (a YAML list) and
// maximum_iterations; extra is added to its data.
func agentNode(tools string, maxIter int, extra string) string {
	return `{type: agent, title: Agent, agent_strategy_provider_name: langgenius/agent/agent, agent_strategy_name: function_calling,
      plugin_unique_identifier: 'langgenius/agent:0.0.9@x'` + extra + `,
      agent_parameters: {
        model: {type: constant, value: {provider: langgenius/openai/openai, model: gpt-4o, completion_params: {temperature: 0.2}, type: model-selector}},
        tools: {type: constant, value: ` + tools + `},
        instruction: {type: constant, value: 'Be brief, {{#start.q#}}.'},
        query: {type: constant, value: 'What time is it?'},
        maximum_iterations: {type: constant, value: ` + fmt.Sprint(maxIter) + `}}}`
}

func agentGraph(node string) string {
	return graph(`
  - id: a
    data: `+node+`
  - id: end
    data: {type: end, title: End, outputs: [{variable: text, value_selector: [a, text]}, {variable: usage, value_selector: [a, usage]},
      {variable: files, value_selector: [a, files]}, {variable: json, value_selector: [a, json]}]}`,
		edge("start", "source", "a"), edge("a", "source", "end"))
}

const timeTools = `[{enabled: true, provider_name: time, tool_name: current_time, type: builtin, tool_label: Current Time,
        parameters: {timezone: {auto: 0, value: Asia/Tokyo}, format: {auto: 1, value: null}}, settings: {},
        extra: {description: 'Tells the time.'}},
      {enabled: false, provider_name: langgenius/tavily/tavily, tool_name: tavily_search, type: builtin}]`

// agentLogs lists "label:status[:parent label]" for the agent_log events.
func agentLogs(t *testing.T, rec *recorder, execID string) []string {
	t.Helper()
	labels := map[string]string{}
	var out []string
	for _, e := range rec.events {
		l, ok := e.(*AgentLog)
		if !ok {
			continue
		}
		if l.Data.NodeExecutionID != execID || l.Data.NodeID != "a" || l.Event != EventAgentLog {
			t.Errorf("agent_log %+v does not belong to the node execution %s", l.Data, execID)
		}
		labels[l.Data.ID] = l.Data.Label
		s := l.Data.Label + ":" + l.Data.Status
		if l.Data.ParentID != nil {
			s += ":" + labels[*l.Data.ParentID]
		}
		out = append(out, s)
	}
	return out
}

func TestAgentNode(t *testing.T) {
	fixedClock(t, time.Date(2024, 3, 5, 13, 4, 5, 0, time.UTC))
	tests := []struct {
		name       string
		node       string
		reply      func(n int, req llm.ChatRequest) *llm.ChatResponse
		wantStatus string
		wantErr    string
		wantText   string
		wantLogs   []string
		check      func(t *testing.T, m *scriptedModel, rec *recorder, res *Result)
	}{
		{
			name: "the model asks for the time, gets it from the tool and answers with it",
			node: agentNode(timeTools, 3, ""),
			reply: func(n int, req llm.ChatRequest) *llm.ChatResponse {
				if n == 0 {
					return callReply("call_1", "current_time", `{}`)
				}
				return &llm.ChatResponse{Content: "It is " + lastTool(req) + ".", FinishReason: "stop", Usage: tokenUsage(5)}
			},
			wantStatus: RunSucceeded,
			wantText:   "It is 2024-03-05 22:04:05.",
			wantLogs: []string{"ROUND 1:start", "gpt-4o Thought:success:ROUND 1", "CALL current_time:success:ROUND 1", "ROUND 1:success",
				"ROUND 2:start", "gpt-4o Thought:success:ROUND 2", "ROUND 2:success"},
			check: func(t *testing.T, m *scriptedModel, rec *recorder, res *Result) {
				if len(m.reqs) != 2 {
					t.Fatalf("%d model calls, want 2", len(m.reqs))
				}
				first, second := m.reqs[0], m.reqs[1]
				want := []llm.Message{{Role: llm.RoleSystem, Content: "Be brief, hi."}, {Role: llm.RoleUser, Content: "What time is it?"}}
				if got := first.Messages; len(got) != 2 || got[0].Role != want[0].Role || got[0].Content != want[0].Content ||
					got[1].Role != want[1].Role || got[1].Content != want[1].Content {
					t.Errorf("first messages %+v", got)
				}
				if len(first.Tools) != 1 || first.Tools[0].Name != "current_time" || first.Tools[0].Description != "Tells the time." {
					t.Errorf("tools offered %+v", first.Tools)
				}
				if first.Params["temperature"] != 0.2 {
					t.Errorf("params %v", first.Params)
				}
				msgs := second.Messages
				if len(msgs) != 4 || msgs[2].Role != llm.RoleAssistant || len(msgs[2].ToolCalls) != 1 ||
					msgs[3].Role != llm.RoleTool || msgs[3].ToolCallID != "call_1" || msgs[3].Name != "current_time" || msgs[3].Content != "2024-03-05 22:04:05" {
					t.Errorf("second messages %+v", msgs)
				}
				if res.TotalTokens != 15 {
					t.Errorf("total tokens %d, want 15", res.TotalTokens)
				}
				if u := res.Outputs["usage"].(map[string]any); u["total_tokens"] != float64(15) || u["prompt_tokens"] != float64(13) {
					t.Errorf("usage %v", u)
				}
				if fmt.Sprint(res.Outputs["files"], res.Outputs["json"]) != "[] []" {
					t.Errorf("files %v json %v", res.Outputs["files"], res.Outputs["json"])
				}
				f := rec.finished("a")
				if f.ExecutionMetadata["total_tokens"] != 15 {
					t.Errorf("metadata %v", f.ExecutionMetadata)
				}
				if fmt.Sprint(f.ProcessData["tools"]) != "[time/current_time]" || f.ProcessData["strategy"] != "function_calling" {
					t.Errorf("process data %v", f.ProcessData)
				}
				for _, e := range rec.events {
					if l, ok := e.(*AgentLog); ok && l.Data.Label == "CALL current_time" {
						out := l.Data.Data["output"].(map[string]any)
						if out["tool_response"] != "2024-03-05 22:04:05" || fmt.Sprint(out["tool_call_input"]) != "map[format:%Y-%m-%d %H:%M:%S timezone:Asia/Tokyo]" {
							t.Errorf("tool log %v", out)
						}
					}
				}
			},
		},
		{
			name: "maximum_iterations bounds the tool rounds and a last round without tools forces an answer",
			node: agentNode(timeTools, 2, ""),
			reply: func(n int, req llm.ChatRequest) *llm.ChatResponse {
				if len(req.Tools) == 0 {
					return &llm.ChatResponse{Content: "Giving up.", Usage: tokenUsage(3)}
				}
				return callReply(fmt.Sprintf("call_%d", n), "current_time", `{"format": "%H:%M"}`)
			},
			wantStatus: RunSucceeded,
			wantText:   "Giving up.",
			check: func(t *testing.T, m *scriptedModel, rec *recorder, res *Result) {
				if len(m.reqs) != 3 {
					t.Fatalf("%d model calls, want 3", len(m.reqs))
				}
				if m.reqs[2].Tools != nil {
					t.Errorf("the last round offered tools")
				}
				var tools []string
				for _, msg := range m.reqs[2].Messages {
					if msg.Role == llm.RoleTool {
						tools = append(tools, msg.Content)
					}
				}
				if fmt.Sprint(tools) != "[22:04 22:04]" {
					t.Errorf("tool results %v", tools)
				}
				if res.TotalTokens != 23 {
					t.Errorf("tokens %d", res.TotalTokens)
				}
			},
		},
		{
			name: "a call of a tool the node does not have is answered with an error, and the run goes on",
			node: agentNode(timeTools, 3, ""),
			reply: func(n int, req llm.ChatRequest) *llm.ChatResponse {
				switch n {
				case 0:
					return callReply("c1", "launch_rocket", `{}`)
				case 1:
					return callReply("c2", "current_time", `not json`)
				}
				return &llm.ChatResponse{Content: "Sorry: " + lastTool(req)}
			},
			wantStatus: RunSucceeded,
			wantText:   "Sorry: Error: the arguments are not a JSON object.",
			wantLogs: []string{"ROUND 1:start", "gpt-4o Thought:success:ROUND 1", "CALL launch_rocket:error:ROUND 1", "ROUND 1:success",
				"ROUND 2:start", "gpt-4o Thought:success:ROUND 2", "CALL current_time:error:ROUND 2", "ROUND 2:success",
				"ROUND 3:start", "gpt-4o Thought:success:ROUND 3", "ROUND 3:success"},
			check: func(t *testing.T, m *scriptedModel, rec *recorder, res *Result) {
				if got := lastTool(m.reqs[1]); got != `Error: there is no tool named "launch_rocket".` {
					t.Errorf("observation %q", got)
				}
			},
		},
		{
			name: "settings and fixed parameters win over the model's arguments",
			node: agentNode(`[{provider_name: langgenius/time/time, tool_name: current_time, type: builtin,
        settings: {format: {value: '%H:%M {{#start.q#}}'}}, parameters: {timezone: {auto: 0, value: Asia/Tokyo}}},
      {provider_name: text, tool_name: text_stats, type: builtin}]`, 3, ""),
			reply: func(n int, req llm.ChatRequest) *llm.ChatResponse {
				if n == 0 {
					return callReply("c1", "current_time", `{"format": "%Y", "timezone": "UTC"}`)
				}
				return &llm.ChatResponse{Content: lastTool(req)}
			},
			wantStatus: RunSucceeded,
			wantText:   "22:04 hi",
			check: func(t *testing.T, m *scriptedModel, rec *recorder, res *Result) {
				tools := m.reqs[0].Tools
				if len(tools) != 2 || tools[1].Name != "text_stats" {
					t.Fatalf("tools %+v", tools)
				}
				if props := tools[0].Parameters["properties"].(map[string]any); len(props) != 0 {
					t.Errorf("current_time offers %v", props)
				}
				if props := tools[1].Parameters["properties"].(map[string]any); props["text"] == nil {
					t.Errorf("text_stats offers %v", props)
				}
			},
		},
		{
			name:       "an enabled tool that is not built in fails the node naming it",
			node:       agentNode(`[{enabled: true, provider_name: langgenius/tavily/tavily, tool_name: tavily_search, type: builtin, plugin_unique_identifier: 'langgenius/tavily:0.0.5@1'}]`, 3, ""),
			wantStatus: RunFailed,
			wantErr:    `The agent node "Agent" cannot use one of its tools: the tool "tavily_search" of provider "langgenius/tavily/tavily" (plugin langgenius/tavily:0.0.5@1) is not one of appkb's built-in tools, and the tools file (--tools) does not map the provider.`,
		},
		{
			name:       "an unknown agent strategy fails clearly",
			node:       strings.Replace(agentNode(`[]`, 3, ""), "langgenius/agent/agent, agent_strategy_name: function_calling", "someone/planner/planner, agent_strategy_name: plan_and_execute", 1),
			wantStatus: RunFailed,
			wantErr:    `uses the strategy "plan_and_execute" of "someone/planner/planner" (plugin langgenius/agent:0.0.9@x), which appkb does not have`,
		},
		{
			name:       "a version 2 agent fails clearly",
			node:       agentNode(`[]`, 3, ", version: '2', agent_node_kind: dify_agent"),
			wantStatus: RunFailed,
			wantErr:    `The agent node "Agent" is a dify_agent agent, which is not supported yet.`,
		},
		{
			name: "ReAct runs the same loop",
			node: strings.Replace(agentNode(`[]`, 3, ""), "function_calling", "ReAct", 1),
			reply: func(n int, req llm.ChatRequest) *llm.ChatResponse {
				if req.Tools != nil {
					return callReply("x", "current_time", "{}")
				}
				return &llm.ChatResponse{Content: "Done without tools."}
			},
			wantStatus: RunSucceeded,
			wantText:   "Done without tools.",
			wantLogs:   []string{"ROUND 1:start", "gpt-4o Thought:success:ROUND 1", "ROUND 1:success"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &scriptedModel{reply: tc.reply}
			src := &scriptedSource{model: m}
			res, rec := run1(t, &Engine{Models: src}, RunInput{Workflow: graphYAML(t, agentGraph(tc.node)), Inputs: map[string]any{"q": "hi"}})
			checkOrder(t, rec)
			if res.Status != tc.wantStatus {
				t.Fatalf("status %s (%q), want %s", res.Status, res.Error, tc.wantStatus)
			}
			if tc.wantErr != "" && !strings.Contains(res.Error, tc.wantErr) {
				t.Errorf("error\n got %q\nwant %q", res.Error, tc.wantErr)
			}
			if tc.wantStatus != RunSucceeded {
				return
			}
			if got := res.Outputs["text"]; got != tc.wantText {
				t.Errorf("text %q, want %q", got, tc.wantText)
			}
			if fmt.Sprint(src.asked) != "[langgenius/openai/openai|gpt-4o]" {
				t.Errorf("models asked for %v", src.asked)
			}
			var execID string
			for _, e := range rec.events {
				if s, ok := e.(*NodeStarted); ok && s.Data.NodeID == "a" {
					execID = s.Data.ID
				}
			}
			logs := agentLogs(t, rec, execID)
			if tc.wantLogs != nil && !slices.Equal(logs, tc.wantLogs) {
				t.Errorf("agent logs\n got %q\nwant %q", logs, tc.wantLogs)
			}
			for _, e := range rec.events {
				if _, err := json.Marshal(e); err != nil {
					t.Errorf("%s does not marshal: %v", e.Name(), err)
				}
			}
			if tc.check != nil {
				tc.check(t, m, rec, res)
			}
		})
	}
}

func TestAgentNodeBuiltinModel(t *testing.T) {
	node := strings.Replace(agentNode(timeTools, 3, ""), "provider: langgenius/openai/openai, model: gpt-4o", "provider: appkb, model: builtin", 1)
	res, rec := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, agentGraph(node)), Inputs: map[string]any{"q": "hi"}})
	checkOrder(t, rec)
	if res.Status != RunSucceeded || Text(res.Outputs["text"]) == "" {
		t.Fatalf("status %s (%q), outputs %v", res.Status, res.Error, res.Outputs)
	}
}

func TestAgentLogJSON(t *testing.T) {
	parent := "r1"
	ev := &AgentLog{Envelope: Envelope{Event: EventAgentLog, TaskID: "t", WorkflowRunID: "w"}, Data: AgentLogData{
		NodeExecutionID: "e", ID: "i", Label: "CALL x", ParentID: &parent, Status: AgentLogSuccess,
		Data: map[string]any{}, Metadata: map[string]any{}, NodeID: "a",
	}}
	b, _ := json.Marshal(ev)
	want := `{"event":"agent_log","task_id":"t","workflow_run_id":"w","data":{"node_execution_id":"e","id":"i","label":"CALL x","parent_id":"r1","error":null,"status":"success","data":{},"metadata":{},"node_id":"a"}}`
	if string(b) != want {
		t.Errorf("json\n got %s\nwant %s", b, want)
	}
}
