package workflow

import (
	"testing"

	"appkb/internal/run/sandbox"
)

// TestPythonSandboxModules shows that the modules Dify's sandbox offers
// besides the standard library import in python3 code nodes (.ci/run
// installs them from Debian), and that code still has no network.
func TestPythonSandboxModules(t *testing.T) {
	py := pythonSandbox(t, sandbox.Config{})
	code := `
import httpx, requests, jinja2, socks

def main(q: str) -> dict:
    try:
        requests.get("http://example.com", timeout=2)
        net = "reachable"
    except Exception:
        net = "offline"
    return {"r": jinja2.Template("{{ a }}-{{ b }}").render(a=q, b=net)}
`
	src := graph(`
  - id: x
    data: {type: code, title: Py, code_language: python3, code: `+yamlString(code)+`,
      variables: [{variable: q, value_selector: [start, q]}], outputs: {r: {type: string}}}
  - id: end
    data: {type: end, title: End, outputs: [{variable: r, value_selector: [x, r]}]}`,
		edge("start", "source", "x"), edge("x", "source", "end"))
	res, _ := run1(t, &Engine{Python: py}, RunInput{Workflow: graphYAML(t, src), Inputs: map[string]any{"q": "hi"}})
	if res.Status != RunSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	if res.Outputs["r"] != "hi-offline" {
		t.Errorf("r = %v", res.Outputs["r"])
	}
}
