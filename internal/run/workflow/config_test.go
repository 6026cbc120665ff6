package workflow

import (
	"strings"
	"testing"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
)

// TestCompileChecksNodeSettings checks that settings that cannot work are
// refused by Compile, as invalid_param naming the node, before any run.
func TestCompileChecksNodeSettings(t *testing.T) {
	tests := []struct {
		name     string
		node     string
		wantNode string // empty: the graph compiles
	}{
		{"known operators compile", `
  - id: cond
    data: {type: if-else, title: Cond, cases: [{case_id: 'true', logical_operator: and, conditions: [
      {variable_selector: [start, q], comparison_operator: contains, value: x},
      {variable_selector: [start, q], comparison_operator: '≥', value: '1'}]}]}`, ""},
		{"an unknown operator", `
  - id: cond
    data: {type: if-else, title: Pick one, cases: [{case_id: 'true', logical_operator: and, conditions: [
      {variable_selector: [start, q], comparison_operator: 'looks like', value: x}]}]}`, `"Pick one"`},
		{"an unknown operator on a file attribute", `
  - id: cond
    data: {type: if-else, title: Files, cases: [{case_id: 'true', logical_operator: and, conditions: [
      {variable_selector: [start, f], comparison_operator: contains,
       sub_variable_condition: {logical_operator: and, conditions: [{key: type, comparison_operator: 'resembles', value: image}]}}]}]}`, `"Files"`},
		{"a classifier without classes", `
  - id: cond
    data: {type: question-classifier, title: Sort, query_variable_selector: [start, q], classes: []}`, `"Sort"`},
		{"an extractor parameter without a name", `
  - id: cond
    data: {type: parameter-extractor, title: Pull, query: [start, q], parameters: [{type: string}]}`, `"Pull"`},
		{"a document extractor without a variable", `
  - id: cond
    data: {type: document-extractor, title: Read}`, `"Read"`},
		{"a classifier with classes compiles", `
  - id: cond
    data: {type: question-classifier, title: Sort, query_variable_selector: [start, q], classes: [{id: '1', name: refunds}]}`, ""},
		{"a form action without an id", `
  - id: cond
    data: {type: human-input, title: Ask, form_content: 'ok?', user_actions: [{id: yes, title: Yes}, {title: No}]}`, `"Ask"`},
		{"two form actions with one id", `
  - id: cond
    data: {type: human-input, title: Ask twice, form_content: 'ok?', user_actions: [{id: yes}, {id: yes}]}`, `"Ask twice"`},
		{"a loop break condition with an unknown operator", `
  - id: cond
    data: {type: loop, title: Spin, loop_count: 3, logical_operator: and, break_conditions: [
      {variable_selector: [start, q], comparison_operator: 'almost', value: x}]}`, `"Spin"`},
		{"a list filter with an unknown operator", `
  - id: cond
    data: {type: list-operator, title: Keep some, variable: [start, q], filter_by: {enabled: true, conditions: [
      {key: '', comparison_operator: 'kind of', value: x}]}}`, `"Keep some"`},
		{"an assigner without a target", `
  - id: cond
    data: {type: assigner, title: Keep, version: '2', items: [{operation: set, input_type: constant, value: 1}]}`, `"Keep"`},
		{"a case without an id", `
  - id: cond
    data: {type: if-else, title: No id, cases: [{logical_operator: and, conditions: []}]}`, `"No id"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := graphYAML(t, graph(tc.node, "\n  - {source: start, target: cond}"))
			g, err := Compile(w)
			if tc.wantNode == "" {
				if err != nil || g == nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			if !apperr.Is(err, apperr.CodeInvalidParam) || !strings.Contains(err.Error(), tc.wantNode) {
				t.Fatalf("Compile error %v, want invalid_param naming %s", err, tc.wantNode)
			}
		})
	}
}

// TestCheck checks the import-time entry: a workflow app with broken node
// settings is refused; apps without a workflow pass.
func TestCheck(t *testing.T) {
	broken := graph(`
  - id: cond
    data: {type: if-else, title: Broken, cases: [{case_id: 'true', logical_operator: and, conditions: [
      {variable_selector: [start, q], comparison_operator: 'sounds like', value: x}]}]}`, "\n  - {source: start, target: cond}")
	tests := []struct {
		name    string
		file    string
		wantErr bool
	}{
		{"a chat app", "app: {mode: chat, name: C}\nkind: app\nversion: 0.3.0\nmodel_config:\n  model: {provider: appkb, name: builtin, mode: chat}\n", false},
		{"a workflow with a broken node", "app: {mode: workflow, name: W}\nkind: app\nversion: 0.3.0\nworkflow:\n  " + strings.ReplaceAll(broken, "\n", "\n  ") + "\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def, err := apps.Parse([]byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			err = Check(def)
			if tc.wantErr != (err != nil) {
				t.Fatalf("Check = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr && !strings.Contains(err.Error(), `"Broken"`) {
				t.Errorf("error %v does not name the node", err)
			}
		})
	}
}

// TestCompileChecksStartForm checks the start node's form: two fields with
// one name are refused.
func TestCompileChecksStartForm(t *testing.T) {
	w := graphYAML(t, `graph:
 nodes:
  - id: start
    data: {type: start, title: Begin, variables: [{variable: q, type: text-input}, {variable: q, type: number}]}
 edges: []`)
	if _, err := Compile(w); !apperr.Is(err, apperr.CodeInvalidParam) || !strings.Contains(err.Error(), `"Begin"`) {
		t.Fatalf("Compile error %v, want invalid_param naming the start node", err)
	}
}
