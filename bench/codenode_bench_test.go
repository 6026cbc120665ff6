package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"appkb/internal/apps"
	"appkb/internal/run/workflow"
)

// BenchmarkCodeNode runs a workflow of one javascript code node or one
// template-transform node (start, the node, end) through the engine, warm:
// the code runs wherever the engine runs it (today a code worker, out of
// process). It reports each run's p50 and p99; "none" is the same run
// without the node, the engine's own share.
func BenchmarkCodeNode(b *testing.B) {
	nodes := map[string]string{
		"none": "",
		"javascript": `
  - id: x
    data: {type: code, title: C, code_language: javascript, outputs: {r: {type: string}},
      code: 'function main({q}) { let s = 0; for (let i = 0; i < 100; i++) s += i; return {r: q + "-" + s} }',
      variables: [{variable: q, value_selector: [start, q]}]}`,
		"template": `
  - id: x
    data: {type: template-transform, title: T, template: '{% for i in range(10) %}{{ q }}{{ i }},{% endfor %}',
      variables: [{variable: q, value_selector: [start, q]}]}`,
	}
	want := map[string]string{"none": "hello", "javascript": "hello-4950", "template": "hello0,hello1,hello2,hello3,hello4,hello5,hello6,hello7,hello8,hello9,"}
	for _, kind := range []string{"none", "javascript", "template"} {
		b.Run(kind, func(b *testing.B) {
			out, edges := "[start, q]", "\n  - {source: start, sourceHandle: source, target: end}"
			if kind != "none" {
				out = "[x, output]"
				if kind == "javascript" {
					out = "[x, r]"
				}
				edges = "\n  - {source: start, sourceHandle: source, target: x}\n  - {source: x, sourceHandle: source, target: end}"
			}
			src := fmt.Sprintf(`graph:
 nodes:
  - id: start
    data: {type: start, title: Start, variables: [{variable: q, type: text-input, required: true}]}%s
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: %s}]}
 edges:%s`, nodes[kind], out, edges)
			var w apps.Workflow
			if err := yaml.Unmarshal([]byte(src), &w); err != nil {
				b.Fatal(err)
			}
			g, err := workflow.Compile(&w)
			if err != nil {
				b.Fatal(err)
			}
			e := &workflow.Engine{}
			in := workflow.RunInput{Graph: g, Inputs: map[string]any{"q": "hello"}}
			run := func() {
				res, err := e.Run(context.Background(), in, func(workflow.Event) {})
				if err != nil || res.Status != workflow.RunSucceeded || res.Outputs["out"] != want[kind] {
					b.Fatalf("%v %v %s %v", err, res.Status, res.Error, res.Outputs["out"])
				}
			}
			for range 20 { // warm: workers started, code compiled
				run()
			}
			var lat latencies
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				t := time.Now()
				run()
				lat.add(time.Since(t))
			}
			lat.report(b)
		})
	}
}
