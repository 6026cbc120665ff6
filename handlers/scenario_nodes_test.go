package handlers_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// importDSL imports an app through the admin API and returns its key.
func importDSL(t *testing.T, s *adminServer, dsl string) string {
	t.Helper()
	rec := s.admin(t, "POST", "/apps", dsl, "application/octet-stream")
	expectStatus(t, rec, 201, "")
	var app struct {
		APIKey string `json:"api_key"`
	}
	decodeInto(t, rec, &app)
	return app.APIKey
}

// scenarioAgent is an agent-chat app on the built-in model whose one tool,
// the built-in timestamp_to_localtime, runs offline.
const scenarioAgent = `app: {mode: agent-chat, name: Clock agent}
kind: app
version: 0.3.0
model_config:
  model: {provider: appkb, name: builtin, mode: chat, completion_params: {}}
  pre_prompt: Use your tools.
  agent_mode:
    enabled: true
    strategy: function_call
    max_iteration: 3
    tools:
    - {enabled: true, provider_type: builtin, provider_id: time, provider_name: time, tool_name: timestamp_to_localtime, tool_label: Local time, tool_parameters: {timezone: UTC}}
  user_input_form: []
`

// scenarioAgentFlow is a chatflow whose agent node (function calling) has
// the same tool.
const scenarioAgentFlow = `app: {mode: advanced-chat, name: Clock flow}
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
        agent_strategy_provider_name: langgenius/agent/agent
        agent_strategy_name: function_calling
        plugin_unique_identifier: 'langgenius/agent:0.0.9@x'
        agent_parameters:
          model: {type: constant, value: {provider: appkb, model: builtin, type: model-selector}}
          tools: {type: constant, value: [{enabled: true, provider_name: time, tool_name: timestamp_to_localtime, type: builtin, parameters: {timezone: {auto: 0, value: UTC}}}]}
          query: {type: constant, value: '{{#sys.query#}}'}
          maximum_iterations: {type: constant, value: 3}
    - id: answer
      data: {type: answer, title: Answer, answer: '{{#agent.text#}}'}
`

// scenarioSorter is a workflow with a question classifier whose second
// class leads to a parameter extractor.
const scenarioSorter = `app: {mode: workflow, name: Sorter}
kind: app
version: 0.3.0
workflow:
  graph:
    edges:
    - {id: e1, source: start, sourceHandle: source, target: qc, targetHandle: target}
    - {id: e2, source: qc, sourceHandle: c2, target: pe, targetHandle: target}
    - {id: e3, source: qc, sourceHandle: c1, target: other, targetHandle: target}
    - {id: e4, source: pe, sourceHandle: source, target: end, targetHandle: target}
    - {id: e5, source: other, sourceHandle: source, target: end2, targetHandle: target}
    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: q, label: Q, type: text-input, required: true}]}
    - id: qc
      data: {type: question-classifier, title: QC, query_variable_selector: [start, q], model: {provider: appkb, name: builtin},
        classes: [{id: c1, name: Billing and invoices}, {id: c2, name: Shipping and delivery}]}
    - id: pe
      data: {type: parameter-extractor, title: PE, query: [start, q], model: {provider: appkb, name: builtin}, parameters: [
        {name: count, type: number, required: true}, {name: speed, type: select, options: [fast, slow]}]}
    - id: other
      data: {type: template-transform, title: O, template: billing, variables: []}
    - id: end
      data: {type: end, title: End, outputs: [{variable: cls, value_selector: [qc, class_name]}, {variable: count, value_selector: [pe, count]},
        {variable: speed, value_selector: [pe, speed]}]}
    - id: end2
      data: {type: end, title: End2, outputs: [{variable: cls, value_selector: [qc, class_name]}]}
`

// TestScenarioToolCallsThroughRouter scripts a tool call for an agent app
// and for a chatflow's agent node: the real tool runs, and the scripted
// answer of the next turn quotes its observation.
func TestScenarioToolCallsThroughRouter(t *testing.T) {
	s := newAdminServer(t, false)
	expectStatus(t, s.admin(t, "PUT", "/scenario", `rules:
  - query: what time
    tool_calls: [{name: timestamp_to_localtime, arguments: {timestamp: 86400, timezone: UTC}}]
    answer: 'The tool says {{observation}}.'
`, "application/octet-stream"), 200, "")
	tests := []struct{ name, dsl string }{
		{"agent app", scenarioAgent},
		{"chatflow agent node", scenarioAgentFlow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := importDSL(t, s, tc.dsl)
			// Agent apps answer only in streaming mode.
			rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key,
				body: `{"query":"what time was it","user":"u1","inputs":{},"response_mode":"streaming"}`})
			expectStatus(t, rec, 200, "")
			var answer strings.Builder
			var observations []string
			for _, f := range readFrames(t, rec.Body.String()) {
				switch f.str("event") {
				case "message", "agent_message":
					answer.WriteString(f.str("answer"))
				case "agent_thought":
					if o := f.str("observation"); o != "" {
						observations = append(observations, o)
					}
				case "error":
					t.Fatalf("error event %v", f)
				}
			}
			// 86400 s after the epoch, in UTC: what the real tool answers.
			if !strings.Contains(answer.String(), "The tool says 1970-01-02 00:00:00") {
				t.Fatalf("answer %q", answer.String())
			}
			if tc.dsl == scenarioAgent && (len(observations) == 0 || !strings.Contains(observations[0], "1970-01-02 00:00:00")) {
				t.Fatalf("agent thoughts' observations %q", observations)
			}
		})
	}
}

// TestScenarioStructuredOutputThroughRouter scripts the JSON the
// question-classifier and parameter-extractor nodes read: the scripted
// class and parameters win over what the built-in model would find in the
// question (it is about an invoice and names no count).
func TestScenarioStructuredOutputThroughRouter(t *testing.T) {
	s := newAdminServer(t, false)
	key := importDSL(t, s, scenarioSorter)
	run := func(t *testing.T, q string) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"inputs": map[string]any{"q": q}, "user": "u1", "response_mode": "blocking"})
		rec := s.do(t, request{method: "POST", path: "/v1/workflows/run", key: key, body: string(body)})
		expectStatus(t, rec, 200, "")
		var out struct {
			Data struct {
				Status  string         `json:"status"`
				Outputs map[string]any `json:"outputs"`
				Error   *string        `json:"error"`
			} `json:"data"`
		}
		decodeInto(t, rec, &out)
		if out.Data.Status != "succeeded" {
			t.Fatalf("run %s: %v", out.Data.Status, out.Data.Error)
		}
		return out.Data.Outputs
	}
	if got := run(t, "a question about my invoice"); got["cls"] != "Billing and invoices" {
		t.Fatalf("without a scenario the built-in model classifies it as billing: %v", got)
	}
	expectStatus(t, s.admin(t, "PUT", "/scenario", `rules:
  - query: invoice
    structured: {category_id: c2, count: 7, speed: slow}
`, "application/octet-stream"), 200, "")
	got := run(t, "a question about my invoice")
	want := map[string]any{"cls": "Shipping and delivery", "count": 7.0, "speed": "slow"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (outputs %v)", k, got[k], v, got)
		}
	}
}
