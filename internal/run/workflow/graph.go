package workflow

import (
	"fmt"
	"slices"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
)

// Graph is the runnable form of a workflow's top-level graph. It is
// immutable once compiled and may be shared by concurrent runs.
type Graph struct {
	workflow *apps.Workflow
	nodes    []*gnode // reachable nodes, in file order
	byID     map[string]*gnode
	edges    []*gedge
	root     *gnode
	// streams maps an llm node id to how its text may be streamed
	// straight into an answer or end node.
	streams map[string]*streamPlan
}

type gnode struct {
	id, kind, title string
	data            map[string]any
	order           int
	in, out         []*gedge
	// container is the iteration or loop the node sits in ("" at the top).
	container, containerKind string
	// sub is the inner graph of an iteration or loop node.
	sub *Graph
	// cfg holds the typed settings of kinds that have them (config.go).
	cfg any
}

type gedge struct {
	idx                    int
	source, target, handle string
}

// streamPlan says that an llm node's text is the next thing an answer (or
// an end) node shows, so its chunks can go out while the model writes.
type streamPlan struct {
	prefix   string // literal answer text shown before the model's text
	answerID string // empty for an end node
}

// Compile builds the runnable graph of w. Canvas notes and nodes the
// start node cannot reach are left out. The nodes inside an iteration or a
// loop form a graph of their own, kept on the container's node.
func Compile(w *apps.Workflow) (*Graph, error) {
	if w == nil {
		return nil, apperr.InvalidParam("The app has no workflow.")
	}
	start := w.StartNode()
	if start == nil {
		return nil, apperr.InvalidParam("The workflow has no start node.")
	}
	return CompileFrom(w, start.ID)
}

// CompileFrom is Compile with the run beginning at the top-level node
// rootID instead of the start node: a knowledge pipeline begins at the
// data source node its run names.
func CompileFrom(w *apps.Workflow, rootID string) (*Graph, error) {
	if w == nil {
		return nil, apperr.InvalidParam("The app has no workflow.")
	}
	seen := map[string]bool{}
	for _, n := range w.Graph.Nodes {
		if n.IsNote() {
			continue
		}
		if seen[n.ID] {
			return nil, apperr.InvalidParam("The workflow has two nodes with the id %q.", n.ID)
		}
		seen[n.ID] = true
	}
	g, err := build(w, "", "", rootID, 0)
	if err != nil {
		return nil, err
	}
	if len(g.root.in) > 0 {
		return nil, apperr.InvalidParam("The start node must not have incoming edges.")
	}
	g.planStreams()
	return g, nil
}

// containerOf names the iteration or loop a node sits in, or "".
func containerOf(n apps.Node) string {
	if n.ParentID != "" {
		return n.ParentID
	}
	if asBool(n.Data["isInIteration"]) {
		return asString(n.Data["iteration_id"])
	}
	if asBool(n.Data["isInLoop"]) {
		return asString(n.Data["loop_id"])
	}
	return ""
}

// build compiles the nodes whose container is parent ("" for the top
// level), keeping what rootID reaches, and then the inner graphs of the
// iterations and loops among them.
func build(w *apps.Workflow, parent, parentKind, rootID string, depth int) (*Graph, error) {
	if depth > 8 {
		return nil, apperr.InvalidParam("Iterations and loops are nested too deeply.")
	}
	g := &Graph{workflow: w, byID: map[string]*gnode{}, streams: map[string]*streamPlan{}}
	all := map[string]*gnode{}
	var order []*gnode
	for i, n := range w.Graph.Nodes {
		if n.IsNote() || containerOf(n) != parent {
			continue
		}
		kind := n.Kind()
		if parent == "" && (kind == apps.NodeIterationStart || kind == apps.NodeLoopStart || kind == apps.NodeLoopEnd) {
			continue
		}
		gn := &gnode{id: n.ID, kind: kind, title: n.Title(), data: n.NormalizedData(), order: i, container: parent, containerKind: parentKind}
		if err := compileConfig(gn); err != nil {
			return nil, err
		}
		all[n.ID] = gn
		order = append(order, gn)
	}
	if all[rootID] == nil {
		return nil, apperr.InvalidParam("The start node %q of %q is missing.", rootID, parent)
	}
	var edges []*gedge
	for _, e := range w.Graph.Edges {
		s, t := all[e.Source], all[e.Target]
		if s == nil || t == nil {
			continue
		}
		h := e.SourceHandle
		if h == "" {
			h = "source"
		}
		ge := &gedge{source: e.Source, target: e.Target, handle: h}
		edges = append(edges, ge)
	}
	// Keep what the root reaches.
	reach := map[string]bool{rootID: true}
	queue := []string{rootID}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, e := range edges {
			if e.source == id && !reach[e.target] {
				reach[e.target] = true
				queue = append(queue, e.target)
			}
		}
	}
	for _, n := range order {
		if reach[n.id] {
			g.nodes = append(g.nodes, n)
			g.byID[n.id] = n
		}
	}
	for _, e := range edges {
		if !reach[e.source] || !reach[e.target] {
			continue
		}
		e.idx = len(g.edges)
		g.edges = append(g.edges, e)
		g.byID[e.source].out = append(g.byID[e.source].out, e)
		g.byID[e.target].in = append(g.byID[e.target].in, e)
	}
	g.root = g.byID[rootID]
	for _, n := range g.nodes {
		if n.kind != apps.NodeIteration && n.kind != apps.NodeLoop {
			continue
		}
		root := innerRoot(w, n)
		if root == "" {
			// The node fails when it runs, naming the problem.
			continue
		}
		sub, err := build(w, n.id, n.kind, root, depth+1)
		if err != nil {
			return nil, err
		}
		n.sub = sub
	}
	return g, nil
}

// innerRoot finds where a container's inner graph begins: its
// start_node_id, or else its iteration-start / loop-start node.
func innerRoot(w *apps.Workflow, c *gnode) string {
	ids := map[string]string{}
	first := ""
	for _, n := range w.Graph.Nodes {
		if n.IsNote() || containerOf(n) != c.id {
			continue
		}
		ids[n.ID] = n.Kind()
		if k := n.Kind(); first == "" && (k == apps.NodeIterationStart || k == apps.NodeLoopStart) {
			first = n.ID
		}
	}
	if id := asString(c.data["start_node_id"]); id != "" && ids[id] != "" {
		return id
	}
	return first
}

// planStreams finds llm nodes whose text feeds an answer node right after
// them (the answer's template shows literal text, then the llm text) or an
// end node's outputs, so that the text can stream.
func (g *Graph) planStreams() {
	for _, n := range g.nodes {
		if n.kind != apps.NodeLLM {
			continue
		}
		for _, e := range n.out {
			t := g.byID[e.target]
			if len(t.in) != 1 {
				continue
			}
			switch t.kind {
			case apps.NodeAnswer:
				prefix := ""
				for _, sg := range parseTemplate(asString(t.data["answer"])) {
					if sg.sel == nil {
						prefix += sg.text
						continue
					}
					if slices.Equal(sg.sel, []string{n.id, "text"}) {
						g.streams[n.id] = &streamPlan{prefix: prefix, answerID: t.id}
					}
					break
				}
			case apps.NodeEnd:
				for _, o := range asList2(t.data["outputs"]) {
					if slices.Equal(selectorOf(o["value_selector"]), []string{n.id, "text"}) {
						g.streams[n.id] = &streamPlan{}
					}
				}
			}
			if g.streams[n.id] != nil {
				break
			}
		}
	}
}

// NodeCount is the number of nodes a run may execute.
func (g *Graph) NodeCount() int { return len(g.nodes) }

func (g *Graph) String() string {
	return fmt.Sprintf("graph(%d nodes, %d edges)", len(g.nodes), len(g.edges))
}

// asString reads a string field of node data.
func asString(v any) string {
	s, _ := v.(string)
	return s
}

// asList2 reads a list of maps from node data.
func asList2(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// asMap reads a map field of node data.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// asBool reads a boolean field of node data.
func asBool(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return x == "true"
	}
	return false
}
