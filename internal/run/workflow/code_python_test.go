package workflow

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"appkb/internal/apps"
	"appkb/internal/run/sandbox"
)

// pythonSandbox builds the bubblewrap sandbox or fails: these tests must
// not pass on a machine that cannot run python code nodes.
func pythonSandbox(t *testing.T, cfg sandbox.Config) *sandbox.Python {
	t.Helper()
	p, err := sandbox.NewPython(cfg)
	if err != nil {
		t.Fatalf("python sandbox: %v", err)
	}
	return p
}

// yamlString quotes s for a YAML flow mapping, line breaks included (a
// JSON string is a valid YAML double-quoted scalar).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestPythonCodeNode(t *testing.T) {
	py := pythonSandbox(t, sandbox.Config{})
	quick := pythonSandbox(t, sandbox.Config{Timeout: 500 * time.Millisecond})
	pyNode := func(code, outputs string) string {
		return `
  - id: x
    data: {type: code, title: Py, code_language: python3, code: ` + yamlString(code) + `,
      variables: [{variable: q, value_selector: [start, q]}, {variable: n, value_selector: [start, n]}],
      outputs: ` + outputs + `}
  - id: end
    data: {type: end, title: End, outputs: [{variable: r, value_selector: [x, r]}, {variable: d, value_selector: [x, d]}]}`
	}
	edges := []string{edge("start", "source", "x"), edge("x", "source", "end")}
	tests := []struct {
		name       string
		code       string
		outputs    string
		engine     Engine
		wantStatus string
		wantOut    map[string]any
		wantErr    string
	}{
		{
			name:       "python3 code runs in the sandbox and its outputs reach the end node",
			code:       "def main(q: str, n: int) -> dict:\n    print(\"debug\", q)\n    return {\"r\": q.upper() + \" ✓\", \"d\": n * 2}\n",
			outputs:    "{r: {type: string}, d: {type: number}}",
			engine:     Engine{Python: py},
			wantStatus: RunSucceeded,
			wantOut:    map[string]any{"r": "HÉLLO ✓", "d": float64(42)},
		},
		{
			name:       "an exception fails the node with its type, message and line",
			code:       "def main(q, n):\n    return {\"r\": q, \"d\": n / 0}\n",
			outputs:    "{r: {type: string}, d: {type: number}}",
			engine:     Engine{Python: py},
			wantStatus: RunFailed,
			wantErr:    "The code failed: ZeroDivisionError: division by zero (line 2",
		},
		{
			name:       "outputs are checked against their declared types",
			code:       "def main(q, n):\n    return {\"r\": 1, \"d\": n}\n",
			outputs:    "{r: {type: string}, d: {type: number}}",
			engine:     Engine{Python: py},
			wantStatus: RunFailed,
			wantErr:    `The output "r" must be of type string, not number.`,
		},
		{
			name:       "the sandbox's time limit stops endless code",
			code:       "def main(q, n):\n    while True:\n        pass\n",
			outputs:    "{}",
			engine:     Engine{Python: quick},
			wantStatus: RunFailed,
			wantErr:    "The code failed: the code ran longer than 500ms",
		},
		{
			name:       "the run's timeout stops the sandbox too",
			code:       "import time\ndef main(q, n):\n    time.sleep(30)\n    return {}\n",
			outputs:    "{}",
			engine:     Engine{Python: py, Timeout: 300 * time.Millisecond},
			wantStatus: RunFailed,
			wantErr:    "took longer than 300ms",
		},
		{
			name:       "without a sandbox python3 code fails clearly",
			code:       "def main(q, n):\n    return {}\n",
			outputs:    "{}",
			engine:     Engine{},
			wantStatus: RunFailed,
			wantErr:    "no python sandbox is configured",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := graphYAML(t, graph(pyNode(tc.code, tc.outputs), edges...))
			e := tc.engine
			res, rec := run1(t, &e, RunInput{Workflow: w, Inputs: map[string]any{"q": "héllo", "n": 21}})
			checkOrder(t, rec)
			if res.Status != tc.wantStatus {
				t.Fatalf("status %s (%q), want %s", res.Status, res.Error, tc.wantStatus)
			}
			if tc.wantErr != "" && !strings.Contains(res.Error, tc.wantErr) {
				t.Fatalf("error %q does not contain %q", res.Error, tc.wantErr)
			}
			for k, v := range tc.wantOut {
				if res.Outputs[k] != v {
					t.Errorf("%s = %#v, want %#v", k, res.Outputs[k], v)
				}
			}
			if tc.wantErr != "" {
				f := rec.finished("x")
				if f == nil || f.Status != NodeFailed || f.Error == nil {
					t.Fatalf("node x: %+v", f)
				}
			}
		})
	}
}

func TestWorkflowAppWithPython(t *testing.T) {
	def := loadApp(t, "../../../testdata/apps/workflow.yml")
	found := false
	for _, n := range def.Workflow.Graph.Nodes {
		if n.Kind() == apps.NodeCode && n.Data["code_language"] == "python3" {
			found = true
		}
	}
	if !found {
		t.Fatal("the app has no python3 code node")
	}
	inputs := map[string]any{"invoice_text": "Paper 10\nInk 20.5", "vat_rate": "10", "currency": "USD"}
	res, rec := run1(t, &Engine{Python: pythonSandbox(t, sandbox.Config{})}, RunInput{Workflow: def.Workflow, Inputs: inputs})
	checkOrder(t, rec)
	if res.Status != RunPartialSucceeded || res.ExceptionsCount != 1 {
		t.Fatalf("got %s %q", res.Status, res.Error)
	}
	want := map[string]any{"net": 30.5, "gross_converted": "conversion unavailable", "line_count": float64(2)}
	for k, v := range want {
		if res.Outputs[k] != v {
			t.Errorf("%s = %#v, want %#v", k, res.Outputs[k], v)
		}
	}
	if f := rec.finished("normalise"); f == nil || f.Status != NodeSucceeded {
		t.Fatalf("code node: %+v", f)
	}
}
