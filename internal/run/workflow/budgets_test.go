package workflow

import (
	"strings"
	"testing"
	"time"
)

// Code and template nodes that try to take the server down end as failed
// runs with a reason.
func TestCodeAndTemplateBudgets(t *testing.T) {
	old := JSMemoryBudget
	JSMemoryBudget = 64 << 20
	t.Cleanup(func() { JSMemoryBudget = old })
	endQ := `
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [x, output]}]}`
	code := func(src string) string {
		return graph(`
  - id: x
    data: {type: code, title: C, code_language: javascript, code: '`+src+`', outputs: {}}`+endQ,
			edge("start", "source", "x"), edge("x", "source", "end"))
	}
	tmpl := func(src string) string {
		return graph(`
  - id: x
    data: {type: template-transform, title: T, template: '`+src+`', variables: []}`+endQ,
			edge("start", "source", "x"), edge("x", "source", "end"))
	}
	tests := []struct {
		name    string
		src     string
		engine  Engine
		wantErr string
	}{
		{"javascript that keeps allocating", code(`function main() { const a = []; for (;;) { a.push("x".repeat(1024) + a.length) } }`),
			Engine{CodeTimeout: time.Minute}, "more than 64 MB of memory"},
		{"javascript that recurses forever", code(`function f(n) { return f(n + 1) + 1 } function main() { f(0); return {} }`),
			Engine{}, "The code failed"},
		{"javascript with a huge output", code(`function main() { return {o: "x".repeat(2000000)} }`),
			Engine{}, "more than 1048576 bytes of output"},
		{"template with a huge range", tmpl(`{% for i in range(20000000) %}{{ i }}{% endfor %}`),
			Engine{}, "range() may make at most 100000 items"},
		{"template with a huge output", tmpl(`{% for i in range(100000) %}xxxxxxxxxx{% endfor %}`),
			Engine{}, "longer than 400000 characters"},
		{"template that loops without writing", tmpl(`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`),
			Engine{CodeTimeout: 200 * time.Millisecond}, "took too long"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.engine
			res, _ := run1(t, &e, RunInput{Workflow: graphYAML(t, tc.src), Inputs: map[string]any{"q": "x"}, UserID: "u"})
			if res.Status != RunFailed || !strings.Contains(res.Error, tc.wantErr) {
				t.Fatalf("status %s, error %q; want failed with %q", res.Status, res.Error, tc.wantErr)
			}
		})
	}
}
