package workflow

import (
	"context"
	"fmt"
	"strings"
	"testing"
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
