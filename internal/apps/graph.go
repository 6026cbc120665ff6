package apps

import (
	"maps"
	"strings"
)

// Node kinds: the `type` inside a node's data. This is the one list; the
// graph engine registers a decoder and an executor for each
// (internal/run/workflow/kinds.go).
const (
	NodeStart              = "start"
	NodeEnd                = "end"
	NodeAnswer             = "answer"
	NodeLLM                = "llm"
	NodeIfElse             = "if-else"
	NodeCode               = "code"
	NodeTool               = "tool"
	NodeAgent              = "agent"
	NodeKnowledgeRetrieval = "knowledge-retrieval"
	NodeQuestionClassifier = "question-classifier"
	NodeVariableAggregator = "variable-aggregator"
	NodeHTTPRequest        = "http-request"
	NodeParameterExtractor = "parameter-extractor"
	NodeTemplateTransform  = "template-transform"
	NodeAssigner           = "assigner"
	NodeListOperator       = "list-operator"
	NodeDocumentExtractor  = "document-extractor"
	NodeHumanInput         = "human-input"
	NodeIteration          = "iteration"
	NodeLoop               = "loop"
	// Markers inside iterations and loops: where the inner graph begins,
	// and (loop-end) where a round stops the loop.
	NodeIterationStart = "iteration-start"
	NodeLoopStart      = "loop-start"
	NodeLoopEnd        = "loop-end"
	// Knowledge pipeline nodes (kind: rag_pipeline files only): where a
	// run's documents come from, and the knowledge base they go into.
	NodeDatasource     = "datasource"
	NodeKnowledgeIndex = "knowledge-index"
)

// legacyNodeKinds maps old type names to the current ones.
var legacyNodeKinds = map[string]string{
	"variable-assigner": NodeVariableAggregator,
	"direct-answer":     NodeAnswer,
}

// Kind returns the node's type from its data, with legacy names replaced by
// current ones. Canvas notes give "".
func (n Node) Kind() string {
	if n.IsNote() {
		return ""
	}
	kind := asString(n.Data["type"])
	if current, ok := legacyNodeKinds[kind]; ok {
		return current
	}
	return kind
}

// IsNote reports whether the node is a canvas note (or has no type at all),
// which never runs.
func (n Node) IsNote() bool {
	return n.Type == "custom-note" || asString(n.Data["type"]) == ""
}

// Title is the node's display name.
func (n Node) Title() string { return asString(n.Data["title"]) }

// NormalizedData returns a copy of the node's data in which settings Dify has
// spelled in more than one way use a single spelling:
//
//   - type: the current name (variable-aggregator for variable-assigner,
//     answer for direct-answer);
//   - llm: structured_output_switch_on (older files: structured_output_enabled);
//   - question-classifier: instruction (older files: instructions);
//   - knowledge-retrieval: multiple_retrieval_config.reranking_enable
//     (also written reranking_enabled);
//   - if-else: a cases list; the legacy top-level conditions become one case
//     with the id "true";
//   - http-request: a lower-case method.
//
// Data itself is never changed.
func (n Node) NormalizedData() map[string]any {
	d := maps.Clone(n.Data)
	if d == nil {
		d = map[string]any{}
	}
	kind := n.Kind()
	if kind != "" {
		d["type"] = kind
	}
	rename := func(m map[string]any, from, to string) {
		if v, ok := m[from]; ok {
			if cur, has := m[to]; !has || cur == nil || cur == "" {
				m[to] = v
			}
			delete(m, from)
		}
	}
	switch kind {
	case NodeLLM:
		rename(d, "structured_output_enabled", "structured_output_switch_on")
	case NodeQuestionClassifier:
		rename(d, "instructions", "instruction")
	case NodeKnowledgeRetrieval:
		if cfg, ok := d["multiple_retrieval_config"].(map[string]any); ok {
			cfg = maps.Clone(cfg)
			rename(cfg, "reranking_enabled", "reranking_enable")
			d["multiple_retrieval_config"] = cfg
		}
	case NodeIfElse:
		if _, has := d["cases"]; !has {
			if conds, ok := d["conditions"]; ok {
				op := d["logical_operator"]
				if op == nil {
					op = "and"
				}
				d["cases"] = []any{map[string]any{
					"case_id":          "true",
					"id":               "true",
					"logical_operator": op,
					"conditions":       conds,
				}}
				delete(d, "conditions")
				delete(d, "logical_operator")
			}
		}
	case NodeHTTPRequest:
		if m, ok := d["method"].(string); ok {
			d["method"] = strings.ToLower(m)
		}
	}
	return d
}

// StartNode returns the start node of the top level of the graph, or nil
// when there is none (for example in a workflow started by a trigger).
func (w *Workflow) StartNode() *Node {
	if w == nil {
		return nil
	}
	for i := range w.Graph.Nodes {
		if n := &w.Graph.Nodes[i]; n.Kind() == NodeStart && n.ParentID == "" {
			return n
		}
	}
	return nil
}

// InputForm returns the fields of the start node, in order. Variables
// without a name are skipped.
func (w *Workflow) InputForm() []FormField {
	start := w.StartNode()
	if start == nil {
		return nil
	}
	vars, _ := start.Data["variables"].([]any)
	out := make([]FormField, 0, len(vars))
	for _, v := range vars {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if f := fieldFromVariable(m); f.Variable != "" {
			out = append(out, f)
		}
	}
	return out
}

// NodesOfKind returns the graph's nodes of one kind (see Node.Kind), in
// file order, containers' inner nodes included.
func (w *Workflow) NodesOfKind(kind string) []Node {
	if w == nil {
		return nil
	}
	var out []Node
	for _, n := range w.Graph.Nodes {
		if n.Kind() == kind {
			out = append(out, n)
		}
	}
	return out
}
