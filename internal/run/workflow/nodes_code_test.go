package workflow

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestJavaScriptRunsAlikeFromTheCache runs each code node twice: the
// second run uses the program its worker compiled for the first, and must
// see fresh globals and report errors as the first did (the cache itself is
// checked in package codeworker).
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
}

// TestTemplatesRenderAlikeFromTheCache renders one template text from
// several runs at once, each with its own input, then checks what a cached
// template must still do per render: range() keeps its budget, a declared
// variable named range hides it, and a template that does not parse fails
// alike every time.
func TestTemplatesRenderAlikeFromTheCache(t *testing.T) {
	flow := func(tmpl string) string {
		return graph(`
  - id: x
    data: {type: template-transform, title: T, template: '`+tmpl+`', variables: [{variable: range, value_selector: [start, q]}, {variable: v, value_selector: [start, q]}]}
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [x, output]}]}`,
			edge("start", "source", "x"), edge("x", "source", "end"))
	}
	plain := func(tmpl string) string {
		return graph(`
  - id: x
    data: {type: template-transform, title: T, template: '`+tmpl+`', variables: [{variable: v, value_selector: [start, q]}]}
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [x, output]}]}`,
			edge("start", "source", "x"), edge("x", "source", "end"))
	}
	render := func(t *testing.T, wf, q string) *Result {
		res, _ := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, wf), Inputs: map[string]any{"q": q}, UserID: "u"})
		return res
	}

	// The same text from eight runs at once, each seeing its own input.
	var wg sync.WaitGroup
	errs := make([]string, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := fmt.Sprintf("run-%d", i)
			res := render(t, plain(`{% for i in range(3) %}{{ v }}{% endfor %}`), q)
			if want := strings.Repeat(q, 3); res.Status != RunSucceeded || res.Outputs["out"] != want {
				errs[i] = fmt.Sprintf("run %d: %s %s %v, want %q", i, res.Status, res.Error, res.Outputs["out"], want)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
	for round := range 2 {
		if res := render(t, plain(`{% for i in range(20000000) %}{{ i }}{% endfor %}`), "x"); res.Status != RunFailed || !strings.Contains(res.Error, "range() may make at most") {
			t.Errorf("round %d, huge range: %s %s", round, res.Status, res.Error)
		}
		if res := render(t, flow(`{{ range }}/{{ v }}`), "shadow"); res.Status != RunSucceeded || res.Outputs["out"] != "shadow/shadow" {
			t.Errorf("round %d, a variable named range: %s %s %v", round, res.Status, res.Error, res.Outputs["out"])
		}
		if res := render(t, plain(`{% for %}`), "x"); res.Status != RunFailed || !strings.Contains(res.Error, "does not parse") {
			t.Errorf("round %d, a broken template: %s %s", round, res.Status, res.Error)
		}
	}
}
