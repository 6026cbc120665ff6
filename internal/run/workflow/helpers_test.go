package workflow

import (
	"context"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"appkb/internal/apps"
	"appkb/internal/run/tools"

	"gopkg.in/yaml.v3"
)

// graphYAML parses the graph part of a workflow block.
func graphYAML(t testing.TB, src string) *apps.Workflow {
	t.Helper()
	var w apps.Workflow
	if err := yaml.Unmarshal([]byte(src), &w); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	return &w
}

// loadApp parses an app file.
func loadApp(t testing.TB, path string) *apps.Definition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	def, err := apps.Parse(data)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return def
}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) emit(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) names() []string {
	var out []string
	for _, e := range r.events {
		out = append(out, e.Name())
	}
	return out
}

// trace lists "name:node_id[:status]" for node events.
func (r *recorder) trace() string {
	var out []string
	for _, e := range r.events {
		switch x := e.(type) {
		case *NodeStarted:
			out = append(out, "start:"+x.Data.NodeID)
		case *NodeFinished:
			out = append(out, "finish:"+x.Data.NodeID+":"+x.Data.Status)
		case *NodeRetry:
			out = append(out, "retry:"+x.Data.NodeID)
		}
	}
	return strings.Join(out, " ")
}

func (r *recorder) finished(nodeID string) *NodeFinishedData {
	for _, e := range r.events {
		if x, ok := e.(*NodeFinished); ok && x.Data.NodeID == nodeID {
			return &x.Data
		}
	}
	return nil
}

func (r *recorder) text() string {
	var b strings.Builder
	for _, e := range r.events {
		if x, ok := e.(*TextChunk); ok {
			b.WriteString(x.Data.Text)
		}
	}
	return b.String()
}

// run1 runs in with e and fails the test when the run cannot start. It
// also checks that the run leaves its compiled graph as it found it:
// servers compile a workflow version once and share the graph between
// concurrent runs, so no executor may write into a node's settings.
func run1(t testing.TB, e *Engine, in RunInput) (*Result, *recorder) {
	t.Helper()
	var pristine *Graph
	if in.Graph == nil && in.Workflow != nil {
		if g, err := Compile(in.Workflow); err == nil {
			in.Graph = g
			pristine, _ = Compile(in.Workflow)
		}
	}
	rec := &recorder{}
	res, err := e.Run(context.Background(), in, rec.emit)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if pristine != nil {
		if path := changedNode(in.Graph, pristine, ""); path != "" {
			t.Fatalf("the run changed the settings of node %s in its compiled graph", path)
		}
	}
	return res, rec
}

// changedNode names the first node whose data or typed settings differ
// between two compilations of one workflow, or "".
func changedNode(g, want *Graph, prefix string) string {
	for i, n := range g.nodes {
		w := want.nodes[i]
		if !reflect.DeepEqual(n.data, w.data) || !reflect.DeepEqual(n.cfg, w.cfg) {
			return prefix + n.id
		}
		if n.sub != nil {
			if path := changedNode(n.sub, w.sub, prefix+n.id+"/"); path != "" {
				return path
			}
		}
	}
	return ""
}

// checkOrder asserts the stream's framing rules: workflow_started first,
// workflow_finished last, each node_finished after its node_started.
func checkOrder(t *testing.T, rec *recorder) {
	t.Helper()
	names := rec.names()
	if len(names) < 2 || names[0] != EventWorkflowStarted || names[len(names)-1] != EventWorkflowFinished {
		t.Fatalf("bad framing: %v", names)
	}
	open := map[string]bool{}
	for _, e := range rec.events[1 : len(rec.events)-1] {
		switch x := e.(type) {
		case *NodeStarted:
			if open[x.Data.ID] {
				t.Errorf("node %s started twice", x.Data.NodeID)
			}
			open[x.Data.ID] = true
		case *NodeFinished:
			if !open[x.Data.ID] {
				t.Errorf("node %s finished before it started", x.Data.NodeID)
			}
			delete(open, x.Data.ID)
		case *NodeRetry:
			if !open[x.Data.ID] {
				t.Errorf("node %s retried before it started", x.Data.NodeID)
			}
		case *WorkflowStarted, *WorkflowFinished:
			t.Errorf("%s in the middle of the stream", e.Name())
		}
	}
	if len(open) > 0 {
		t.Errorf("nodes never finished: %v", open)
	}
}

// fixedClock makes the time tools see at as now until the test ends.
func fixedClock(t *testing.T, at time.Time) {
	t.Helper()
	old := tools.Now
	tools.Now = func() time.Time { return at }
	t.Cleanup(func() { tools.Now = old })
}
