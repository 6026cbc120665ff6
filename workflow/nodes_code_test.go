package workflow

import (
	"fmt"
	"strings"
	"testing"
)

// TestJavaScriptRunsAlikeFromTheCache runs each code node twice: the
// second run uses the program compiled for the first, and must see fresh
// globals and report errors as the first did.
func TestJavaScriptRunsAlikeFromTheCache(t *testing.T) {
	code := func(src string) string {
		return graph(`
  - id: x
    data: {type: code, title: C, code_language: javascript, code: '`+src+`', outputs: {}}
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [x, n]}]}`,
			edge("start", "source", "x"), edge("x", "source", "end"))
	}
	tests := []struct {
		name    string
		src     string
		want    string // the output out of a successful run, printed
		wantErr string // or the run's error
	}{
		{"globals start afresh", `var n = 0; function main() { n++; return {n: n} }`, "1", ""},
		{"a syntax error", `function main( { return {} }`, "", "SyntaxError"},
		{"no main", `var n = 1`, "", "does not define a function main"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 2 {
				res, _ := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, code(tc.src)), Inputs: map[string]any{"q": "x"}, UserID: "u"})
				if tc.wantErr != "" {
					if res.Status != RunFailed || !strings.Contains(res.Error, tc.wantErr) {
						t.Fatalf("round %d: status %s, error %q; want failed with %q", round, res.Status, res.Error, tc.wantErr)
					}
					continue
				}
				if res.Status != RunSucceeded || fmt.Sprint(res.Outputs["out"]) != tc.want {
					t.Fatalf("round %d: status %s (%s), out %#v; want %#v", round, res.Status, res.Error, res.Outputs["out"], tc.want)
				}
			}
		})
	}
	if compiledJS(`function main( {`) != nil {
		t.Error("code that does not compile was cached")
	}
	if a, b := compiledJS(`function main() { return {} }`), compiledJS(`function main() { return {} }`); a == nil || a != b {
		t.Error("the same code was compiled twice")
	}
}
