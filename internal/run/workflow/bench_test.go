package workflow

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkPassThrough measures the engine's overhead per node on a chain
// of variable aggregators (nodes that do next to nothing). Divide ns/op by
// the reported nodes/op, or read the ns/node metric.
func BenchmarkPassThrough(b *testing.B) {
	const n = 20
	var nodes strings.Builder
	var edges []string
	prev := "start"
	for i := range n {
		id := fmt.Sprintf("p%d", i)
		fmt.Fprintf(&nodes, "\n  - id: %s\n    data: {type: variable-aggregator, title: P, variables: [[%s, output], [start, q]]}", id, prev)
		edges = append(edges, edge(prev, "source", id))
		prev = id
	}
	nodes.WriteString("\n  - id: end\n    data: {type: end, title: End, outputs: [{variable: o, value_selector: [" + prev + ", output]}]}")
	edges = append(edges, edge(prev, "source", "end"))
	g, err := Compile(graphYAML(b, graph(nodes.String(), edges...)))
	if err != nil {
		b.Fatal(err)
	}
	e := &Engine{}
	in := RunInput{Graph: g, Inputs: map[string]any{"q": "x"}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := e.Run(context.Background(), in, func(Event) {})
		if err != nil || res.Status != RunSucceeded {
			b.Fatal(err, res.Status)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n+2), "ns/node")
}

// BenchmarkParallelIteration runs an iteration over 20 items in order and
// with is_parallel (10 slots), with two kinds of rounds: "cpu" rounds of a
// template-transform and a variable aggregator, which show what the
// per-round scopes cost, and "io" rounds of one http-request to a local
// server that answers after 2 ms, which show rounds overlapping. ns/round
// is the time per item.
func BenchmarkParallelIteration(b *testing.B) {
	const items = 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond)
		w.Write([]byte(strings.TrimPrefix(r.URL.Path, "/")))
	}))
	defer srv.Close()
	inner := map[string]string{
		"cpu": `
  - id: t
    parentId: it
    data: {type: template-transform, title: T, template: '{{ i }}-{{ x }}', isInIteration: true, iteration_id: it,
      variables: [{variable: x, value_selector: [it, item]}, {variable: i, value_selector: [it, index]}]}
  - id: body
    parentId: it
    data: {type: variable-aggregator, title: A, variables: [[t, output]], isInIteration: true, iteration_id: it}`,
		"io": `
  - id: t
    parentId: it
    data: {type: http-request, title: H, method: get, url: '` + srv.URL + `/{{#it.item#}}', isInIteration: true, iteration_id: it}
  - id: body
    parentId: it
    data: {type: variable-aggregator, title: A, variables: [[t, body]], isInIteration: true, iteration_id: it}`,
	}
	list := make([]string, items)
	for i := range list {
		list[i] = fmt.Sprintf("%q", fmt.Sprintf("item%d", i))
	}
	for _, kind := range []string{"cpu", "io"} {
		for _, mode := range []struct{ name, extra string }{{"in-order", ""}, {"parallel", ", is_parallel: true, parallel_nums: 10"}} {
			b.Run(kind+"/"+mode.name, func(b *testing.B) {
				src := graph(`
  - id: arr
    data: {type: code, title: Arr, code_language: javascript, code: 'function main() { return {items: [`+strings.Join(list, ",")+`]} }',
      variables: [], outputs: {items: {type: 'array[string]'}}}
  - id: it
    data: {type: iteration, title: It, iterator_selector: [arr, items], output_selector: [body, output], start_node_id: its`+mode.extra+`}
  - id: its
    parentId: it
    type: custom-iteration-start
    data: {type: iteration-start, title: S, isInIteration: true}`+inner[kind]+`
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [it, output]}]}`,
					edge("start", "source", "arr"), edge("arr", "source", "it"), edge("its", "source", "t"), edge("t", "source", "body"), edge("it", "source", "end"))
				g, err := Compile(graphYAML(b, src))
				if err != nil {
					b.Fatal(err)
				}
				e := localEngine()
				in := RunInput{Graph: g, Inputs: map[string]any{"q": "x"}}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					res, err := e.Run(context.Background(), in, func(Event) {})
					if err != nil || res.Status != RunSucceeded {
						b.Fatal(err, res.Status, res.Error)
					}
					if out, _ := asList(res.Outputs["out"]); len(out) != items {
						b.Fatalf("%d outputs", len(out))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/items, "ns/round")
			})
		}
	}
}
