package workflow

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"appkb/internal/apps"

	"github.com/getkin/kin-openapi/openapi3"
)

var (
	specOnce sync.Once
	spec     *openapi3.T
	specErr  error
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	specOnce.Do(func() {
		spec, specErr = openapi3.NewLoader().LoadFromFile("../../../openapi.yaml")
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	return spec
}

// schemaNames maps an event to its schema in the workflow stream and in
// the chat stream of a chatflow.
var schemaNames = map[string][2]string{
	EventWorkflowStarted:    {"WorkflowStreamEventWorkflowStarted", "StreamEventWorkflowStarted"},
	EventNodeStarted:        {"WorkflowStreamEventNodeStarted", "StreamEventNodeStarted"},
	EventNodeFinished:       {"WorkflowStreamEventNodeFinished", "StreamEventNodeFinished"},
	EventNodeRetry:          {"WorkflowStreamEventNodeRetry", "StreamEventNodeRetry"},
	EventTextChunk:          {"StreamEventTextChunk", "StreamEventChatTextChunk"},
	EventWorkflowFinished:   {"WorkflowStreamEventWorkflowFinished", "StreamEventWorkflowFinished"},
	EventIterationStarted:   {"WorkflowStreamEventIterationStarted", "StreamEventIterationStarted"},
	EventIterationNext:      {"WorkflowStreamEventIterationNext", "StreamEventIterationNext"},
	EventIterationCompleted: {"WorkflowStreamEventIterationCompleted", "StreamEventIterationCompleted"},
	EventLoopStarted:        {"WorkflowStreamEventLoopStarted", "StreamEventLoopStarted"},
	EventLoopNext:           {"WorkflowStreamEventLoopNext", "StreamEventLoopNext"},
	EventLoopCompleted:      {"WorkflowStreamEventLoopCompleted", "StreamEventLoopCompleted"},
}

// TestEventsMatchSchemas runs graphs that emit every event kind, in both
// modes, and validates each event's JSON against openapi.yaml.
func TestEventsMatchSchemas(t *testing.T) {
	doc := loadSpec(t)
	src := graph(`
  - id: r
    data: {type: code, title: R, code_language: javascript, code: 'function main() { throw new Error("x") }', outputs: {},
      error_strategy: default-value, default_value: [{key: v, type: string, value: d}], retry_config: {retry_enabled: true, max_retries: 1, retry_interval: 1}}
  - id: l
    data: {type: llm, title: L, model: {provider: appkb, name: builtin, mode: chat}, prompt_template: [{role: user, text: '{{#start.q#}}'}]}
  - id: a
    data: {type: answer, title: A, answer: 'Reply: {{#l.text#}} ({{#r.v#}})'}
  - id: end
    data: {type: end, title: End, outputs: [{variable: t, value_selector: [l, text]}]}`,
		edge("start", "source", "r"), edge("r", "source", "l"), edge("l", "source", "a"), edge("a", "source", "end"))
	// A second graph covers the iteration and loop events.
	ws := []*apps.Workflow{graphYAML(t, src), graphYAML(t, iterGraph(`["a","b"]`, `function main({item}) { return {result: item} }`, "")), graphYAML(t, loopGraph(""))}
	for mode, idx := range map[string]int{ModeWorkflow: 0, ModeChatflow: 1} {
		t.Run(mode, func(t *testing.T) {
			rec := &recorder{}
			for _, w := range ws {
				in := RunInput{Workflow: w, Mode: mode, Inputs: map[string]any{"q": "hello"}}
				if mode == ModeChatflow {
					in.MessageID, in.ConversationID = "6a0e0c43-4d0b-4b8e-9a55-0e0d8e2e7d11", "3f1c1e5e-8f7a-4e57-9d1b-2b9f8f1c0a01"
				}
				if _, err := (&Engine{}).Run(context.Background(), in, rec.emit); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[string]bool{}
			for _, ev := range rec.events {
				seen[ev.Name()] = true
				name := schemaNames[ev.Name()][idx]
				ref := doc.Components.Schemas[name]
				if ref == nil {
					t.Fatalf("no schema %s", name)
				}
				b, err := json.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				var v any
				_ = json.Unmarshal(b, &v)
				if err := ref.Value.VisitJSON(v); err != nil {
					t.Errorf("%s does not match %s: %v\n%s", ev.Name(), name, err, b)
				}
			}
			for n := range schemaNames {
				if !seen[n] {
					t.Errorf("no %s event was emitted", n)
				}
			}
		})
	}
}
