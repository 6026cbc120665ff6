package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"appkb/internal/platform/apperr"
)

// startNode is a start node with a text input q and an optional number n.
const startNode = `
  - id: start
    data: {type: start, title: Start, variables: [
      {variable: q, type: text-input, required: true, max_length: 50},
      {variable: n, type: number, required: false}]}`

func edge(src, handle, dst string) string {
	return fmt.Sprintf("\n  - {source: %s, sourceHandle: '%s', target: %s}", src, handle, dst)
}

func graph(nodes string, edges ...string) string {
	return "graph:\n nodes:" + startNode + nodes + "\n edges:" + strings.Join(edges, "")
}

func TestGraphs(t *testing.T) {
	endQ := `
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [x, output]}]}`
	tests := []struct {
		name       string
		src        string
		inputs     map[string]any
		engine     Engine
		wantStatus string
		wantOut    map[string]any
		wantTrace  string
		wantErr    string
	}{
		{
			name: "start to end passes an input through",
			src: graph(`
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [start, q]}, {variable: num, value_selector: [start, n]}]}`,
				edge("start", "source", "end")),
			inputs:     map[string]any{"q": "hi", "n": "3"},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"out": "hi", "num": float64(3)},
			wantTrace:  "start:start finish:start:succeeded start:end finish:end:succeeded",
		},
		{
			name: "if-else takes the true case, the false branch is skipped and the join still runs",
			src: graph(`
  - id: cond
    data: {type: if-else, title: Cond, cases: [{case_id: 'true', logical_operator: and, conditions: [
      {variable_selector: [start, q], comparison_operator: contains, value: refund}]}]}
  - id: a
    data: {type: template-transform, title: A, template: 'refund: {{ q }}', variables: [{variable: q, value_selector: [start, q]}]}
  - id: b
    data: {type: template-transform, title: B, template: 'other', variables: []}
  - id: x
    data: {type: variable-aggregator, title: Join, variables: [[a, output], [b, output]]}`+endQ,
				edge("start", "source", "cond"), edge("cond", "true", "a"), edge("cond", "false", "b"),
				edge("a", "source", "x"), edge("b", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "a refund please"},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"out": "refund: a refund please"},
			wantTrace:  "start:start finish:start:succeeded start:cond finish:cond:succeeded start:a finish:a:succeeded start:x finish:x:succeeded start:end finish:end:succeeded",
		},
		{
			name: "if-else falls to the false edge; legacy single-condition form",
			src: graph(`
  - id: cond
    data: {type: if-else, title: Cond, logical_operator: and, conditions: [
      {variable_selector: [start, n], comparison_operator: '>', value: '10'}]}
  - id: a
    data: {type: template-transform, title: A, template: 'big', variables: []}
  - id: b
    data: {type: template-transform, title: B, template: 'small', variables: []}
  - id: x
    data: {type: variable-assigner, title: Join, variables: [[a, output], [b, output]]}`+endQ,
				edge("start", "source", "cond"), edge("cond", "true", "a"), edge("cond", "false", "b"),
				edge("a", "source", "x"), edge("b", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x", "n": 3},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"out": "small"},
		},
		{
			name: "a fork runs both branches and the join waits for both",
			src: graph(`
  - id: a
    data: {type: code, title: A, code_language: javascript, code: 'function main({q}) { return {r: q + "-a"} }',
      variables: [{variable: q, value_selector: [start, q]}], outputs: {r: {type: string}}}
  - id: b
    data: {type: code, title: B, code_language: javascript, code: 'function main({n}) { return {r: n * 2} }',
      variables: [{variable: n, value_selector: [start, n]}], outputs: {r: {type: number}}}
  - id: end
    data: {type: end, title: End, outputs: [{variable: a, value_selector: [a, r]}, {variable: b, value_selector: [b, r]}]}`,
				edge("start", "source", "a"), edge("start", "source", "b"), edge("a", "source", "end"), edge("b", "source", "end")),
			inputs:     map[string]any{"q": "x", "n": 21},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"a": "x-a", "b": float64(42)},
		},
		{
			name: "the same fork runs one node at a time in file order with Parallelism 1",
			src: graph(`
  - id: a
    data: {type: template-transform, title: A, template: 'a', variables: []}
  - id: b
    data: {type: template-transform, title: B, template: 'b', variables: []}
  - id: x
    data: {type: template-transform, title: X, template: '{{ a }}{{ b }}', variables: [{variable: a, value_selector: [a, output]}, {variable: b, value_selector: [b, output]}]}`+endQ,
				edge("start", "source", "b"), edge("start", "source", "a"), edge("a", "source", "x"), edge("b", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			engine:     Engine{Parallelism: 1},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"out": "ab"},
			wantTrace:  "start:start finish:start:succeeded start:a finish:a:succeeded start:b finish:b:succeeded start:x finish:x:succeeded start:end finish:end:succeeded",
		},
		{
			name: "fail-branch follows the fail-branch edge with the error outputs",
			src: graph(`
  - id: c
    data: {type: code, title: C, code_language: javascript, code: 'function main() { throw new Error("boom") }', error_strategy: fail-branch, outputs: {}}
  - id: ok
    data: {type: template-transform, title: OK, template: 'fine', variables: []}
  - id: x
    data: {type: template-transform, title: X, template: 'caught {{ e }}', variables: [{variable: e, value_selector: [c, error_type]}]}`+endQ,
				edge("start", "source", "c"), edge("c", "source", "ok"), edge("c", "fail-branch", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunPartialSucceeded,
			wantOut:    map[string]any{"out": "caught CodeNodeError"},
			wantTrace:  "start:start finish:start:succeeded start:c finish:c:exception start:x finish:x:succeeded start:end finish:end:succeeded",
		},
		{
			name: "default-value uses the configured outputs and the normal edge",
			src: graph(`
  - id: x
    data: {type: http-request, title: Fetch, method: GET, url: 'http://169.254.169.254/latest', error_strategy: default-value,
      default_value: [{key: output, type: string, value: fallback}]}`+endQ,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunPartialSucceeded,
			wantOut:    map[string]any{"out": "fallback"},
		},
		{
			name: "a node type that is not built yet fails the run naming it",
			src: graph(`
  - id: x
    data: {type: trigger-webhook, title: Hook}`+endQ,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunFailed,
			wantErr:    `The node type "trigger-webhook" (node "Hook") is not supported yet.`,
			wantTrace:  "start:start finish:start:succeeded start:x finish:x:failed",
		},
		{
			name: "retries then fails, emitting node_retry for each retry",
			src: graph(`
  - id: x
    data: {type: code, title: C, code_language: javascript, code: 'function main() { throw new Error("flaky") }', outputs: {},
      retry_config: {retry_enabled: true, max_retries: 2, retry_interval: 1}}`+endQ,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunFailed,
			wantErr:    "flaky",
			wantTrace:  "start:start finish:start:succeeded start:x retry:x retry:x finish:x:failed",
		},
		{
			name: "retries are not used when the node succeeds",
			src: graph(`
  - id: x
    data: {type: template-transform, title: T, template: ok, variables: [], retry_config: {retry_enabled: true, max_retries: 3, retry_interval: 1}}`+endQ,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"out": "ok"},
		},
		{
			name: "the step limit stops a run",
			src: graph(`
  - id: x
    data: {type: template-transform, title: T, template: ok, variables: []}`+endQ,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			engine:     Engine{MaxSteps: 2},
			wantStatus: RunFailed,
			wantErr:    "The run stopped after 2 steps",
		},
		{
			name: "the run timeout stops a slow node",
			src: graph(`
  - id: x
    data: {type: code, title: Loop, code_language: javascript, code: 'function main() { for(;;){} }', outputs: {}}`+endQ,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			engine:     Engine{Timeout: 100 * time.Millisecond},
			wantStatus: RunFailed,
			wantErr:    "took longer than 100ms",
		},
		{
			name: "javascript code is stopped at its time limit",
			src: graph(`
  - id: x
    data: {type: code, title: Loop, code_language: javascript, code: 'function main() { for(;;){} }', outputs: {}}`+endQ,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			engine:     Engine{CodeTimeout: 50 * time.Millisecond},
			wantStatus: RunFailed,
			wantErr:    "ran longer than 50ms",
		},
		{
			name: "code outputs are checked against their declared types",
			src: graph(`
  - id: x
    data: {type: code, title: C, code_language: javascript, code: 'function main() { return {output: "not a number"} }', outputs: {output: {type: number}}}`+endQ,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunFailed,
			wantErr:    `The output "output" must be of type number, not string.`,
		},
		{
			name: "python3 code fails clearly until the sandbox exists",
			src: graph(`
  - id: x
    data: {type: code, title: Py, code_language: python3, code: 'def main(): return {}', outputs: {}}`+endQ,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunFailed,
			wantErr:    "python3, which is not available yet",
		},
		{
			name: "list operator filters, orders, limits",
			src: graph(`
  - id: mk
    data: {type: code, title: Mk, code_language: javascript, code: 'function main() { return {xs: [5, 1, 9, 3, 7]} }', outputs: {xs: {type: 'array[number]'}}}
  - id: x
    data: {type: list-operator, title: L, variable: [mk, xs], filter_by: {enabled: true, conditions: [{comparison_operator: '>', value: '2'}]},
      order_by: {enabled: true, value: desc}, limit: {enabled: true, size: 2}}
  - id: end
    data: {type: end, title: End, outputs: [{variable: r, value_selector: [x, result]}, {variable: f, value_selector: [x, first_record]}]}`,
				edge("start", "source", "mk"), edge("mk", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"r": []any{float64(9), float64(7)}, "f": float64(9)},
		},
		{
			name: "variable aggregator groups",
			src: graph(`
  - id: x
    data: {type: variable-aggregator, title: Agg, advanced_settings: {group_enabled: true, groups: [
      {group_name: g1, variables: [[nope, v], [start, q]]}, {group_name: g2, variables: [[start, n]]}]}}
  - id: end
    data: {type: end, title: End, outputs: [{variable: a, value_selector: [x, g1, output]}, {variable: b, value_selector: [x, g2, output]}]}`,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"a": "x", "b": nil},
		},
		{
			name: "knowledge retrieval without a retriever gives an empty result",
			src: graph(`
  - id: x
    data: {type: knowledge-retrieval, title: K, query_variable_selector: [start, q], dataset_ids: [d1], retrieval_mode: multiple}
  - id: end
    data: {type: end, title: End, outputs: [{variable: r, value_selector: [x, result]}]}`,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"r": []any{}},
		},
		{
			name: "templates read env, sys and file attributes; secrets stay out of errors",
			src: `environment_variables: [{name: token, value_type: secret, value: s3cr3t-value}, {name: base, value_type: string, value: B}]
` + graph(`
  - id: x
    data: {type: code, title: C, code_language: javascript, code: 'function main({t, b, u}) { throw new Error("bad " + t + " " + b + " " + u) }', outputs: {},
      variables: [{variable: t, value_selector: [env, token]}, {variable: b, value_selector: [env, base]}, {variable: u, value_selector: [sys, user_id]}]}`+endQ,
				edge("start", "source", "x"), edge("x", "source", "end")),
			inputs:     map[string]any{"q": "x"},
			wantStatus: RunFailed,
			wantErr:    "bad ****** B user-1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := graphYAML(t, tc.src)
			e := tc.engine
			res, rec := run1(t, &e, RunInput{Workflow: w, Inputs: tc.inputs, UserID: "user-1"})
			checkOrder(t, rec)
			if res.Status != tc.wantStatus {
				t.Fatalf("status %s (error %q), want %s; trace %s", res.Status, res.Error, tc.wantStatus, rec.trace())
			}
			if tc.wantErr != "" && !strings.Contains(res.Error, tc.wantErr) {
				t.Errorf("error %q, want it to contain %q", res.Error, tc.wantErr)
			}
			if tc.wantOut != nil {
				if got, want := fmt.Sprint(plain(res.Outputs)), fmt.Sprint(tc.wantOut); got != want {
					t.Errorf("outputs %s, want %s", got, want)
				}
			}
			for _, ev := range rec.events {
				if b, _ := json.Marshal(ev); strings.Contains(string(b), "s3cr3t-value") {
					t.Errorf("secret leaked in %s", b)
				}
			}
			if tc.wantTrace != "" && rec.trace() != tc.wantTrace {
				t.Errorf("trace\n got %s\nwant %s", rec.trace(), tc.wantTrace)
			}
			fin := rec.events[len(rec.events)-1].(*WorkflowFinished)
			if fin.Data.Status != res.Status || fin.Data.TotalSteps != res.TotalSteps {
				t.Errorf("workflow_finished %+v disagrees with result %+v", fin.Data, res)
			}
		})
	}
}

func TestInputValidation(t *testing.T) {
	w := graphYAML(t, graph(`
  - id: end
    data: {type: end, title: End, outputs: []}`, edge("start", "source", "end")))
	tests := []struct {
		name   string
		inputs map[string]any
		want   string
	}{
		{"missing required input → invalid_param", map[string]any{}, "q is required in input form"},
		{"too long text → invalid_param", map[string]any{"q": strings.Repeat("x", 51)}, "must be less than 50 characters"},
		{"number that is not a number → invalid_param", map[string]any{"q": "x", "n": "many"}, "must be a valid number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&Engine{}).Run(context.Background(), RunInput{Workflow: w, Inputs: tc.inputs}, nil)
			if !apperr.Is(err, apperr.CodeInvalidParam) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want invalid_param %q", err, tc.want)
			}
		})
	}
}

func TestStop(t *testing.T) {
	w := graphYAML(t, graph(`
  - id: x
    data: {type: code, title: Loop, code_language: javascript, code: 'function main() { for(;;){} }', outputs: {}}`,
		edge("start", "source", "x")))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	res, err := (&Engine{}).Run(ctx, RunInput{Workflow: w, Inputs: map[string]any{"q": "x"}}, nil)
	if err != nil || res.Status != RunStopped {
		t.Fatalf("res %+v err %v, want stopped", res, err)
	}
}
