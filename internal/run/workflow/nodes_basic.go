package workflow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/jsonnum"
)

// validateInputs checks the run's inputs against the start node's form
// and returns the values the run uses: declared variables only, defaults
// filled in, numbers and booleans converted.
func validateInputs(start *gnode, given map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for _, v := range start.cfg.(*startConfig).vars {
		name, kind := v.name, v.kind
		val, ok := given[name]
		if !ok || isEmpty(val) {
			val = v.def
		}
		if isEmpty(val) {
			if v.required {
				return nil, apperr.InvalidParam("%s is required in input form", name)
			}
			if kind == apps.FieldCheckbox {
				out[name] = false
			}
			continue
		}
		switch kind {
		case apps.FieldTextInput, apps.FieldParagraph, apps.FieldSelect, "":
			s, isStr := val.(string)
			if !isStr {
				if _, isNum := jsonnum.Float(val); !isNum {
					return nil, apperr.InvalidParam("%s in input form must be a string", name)
				}
				s = Text(val)
			}
			if ml := v.maxLength; ml > 0 && kind != apps.FieldSelect && utf8.RuneCountInString(s) > ml {
				return nil, apperr.InvalidParam("%s in input form must be less than %d characters", name, ml)
			}
			if kind == apps.FieldSelect {
				opts := v.options
				if len(opts) > 0 && !slices.Contains(opts, s) {
					return nil, apperr.InvalidParam("%s in input form must be one of the following: %s", name, strings.Join(opts, ", "))
				}
			}
			val = s
		case apps.FieldNumber:
			n, ok := inputNumber(val)
			if !ok {
				return nil, apperr.InvalidParam("%s in input form must be a valid number", name)
			}
			val = n
		case apps.FieldCheckbox:
			b := coerce(TypeBoolean, val)
			if _, ok := b.(bool); !ok {
				return nil, apperr.InvalidParam("%s in input form must be a boolean", name)
			}
			val = b
		case apps.FieldFile:
			m, _ := val.(map[string]any)
			f, ok := FileFromMap(m)
			if !ok {
				if ff, isFile := val.(File); isFile {
					f, ok = ff, true
				}
			}
			if !ok {
				return nil, apperr.InvalidParam("%s in input form must be a file", name)
			}
			f.Identity = FileIdentity
			val = f
		case apps.FieldFileList:
			list, ok := asList(val)
			if !ok {
				return nil, apperr.InvalidParam("%s in input form must be a list of files", name)
			}
			files := make([]any, 0, len(list))
			for _, e := range list {
				m, _ := e.(map[string]any)
				f, ok := FileFromMap(m)
				if ff, isFile := e.(File); isFile {
					f, ok = ff, true
				}
				if !ok {
					return nil, apperr.InvalidParam("%s in input form must be a list of files", name)
				}
				f.Identity = FileIdentity
				files = append(files, f)
			}
			if ml := v.maxLength; ml > 0 && len(files) > ml {
				return nil, apperr.InvalidParam("%s in input form may hold at most %d files", name, ml)
			}
			val = files
		case apps.FieldJSONObject:
			o := coerce(TypeObject, val)
			if _, ok := o.(map[string]any); !ok {
				return nil, apperr.InvalidParam("%s in input form must be a JSON object", name)
			}
			val = o
		}
		out[name] = val
	}
	return out, nil
}

func asAnyList(v any) []any {
	l, _ := asList(v)
	return l
}

func runStart(x *nodeRun) (*outcome, error) {
	outputs := map[string]any{}
	for k, v := range x.r.in.Inputs {
		outputs[k] = v
	}
	// Old files read system variables through the start node.
	for k, v := range x.pool.Scope(ScopeSys) {
		outputs["sys."+k] = v
	}
	return &outcome{inputs: x.r.in.Inputs, outputs: outputs}, nil
}

func runEnd(x *nodeRun) (*outcome, error) {
	outputs := map[string]any{}
	for _, o := range x.n.cfg.(*endConfig).outputs {
		outputs[o.name] = x.get(o.selector)
	}
	return &outcome{inputs: outputs, outputs: outputs}, nil
}

// runAnswer renders the answer template and streams it piece by piece. A
// leading llm text that already streamed is not sent again.
func runAnswer(x *nodeRun) (*outcome, error) {
	segs := x.n.cfg.(*answerConfig).segments
	skip := -1
	for id, plan := range x.r.g.streams {
		if plan.answerID != x.n.id {
			continue
		}
		x.r.mu.Lock()
		done := x.r.streamed[id]
		x.r.mu.Unlock()
		if !done {
			break
		}
		for i, sg := range segs {
			if sg.sel != nil {
				skip = i
				break
			}
		}
	}
	var full strings.Builder
	for i, sg := range segs {
		text := x.pool.renderSegment(sg)
		full.WriteString(text)
		if i <= skip {
			continue
		}
		sel := sg.sel
		if sel == nil {
			sel = []string{x.n.id, "answer"}
		}
		x.r.textChunk(text, sel)
	}
	return &outcome{outputs: map[string]any{"answer": full.String(), "files": []any{}}}, nil
}

// runAggregator gives the first input that has a value, per group when
// groups are on.
func runAggregator(x *nodeRun) (*outcome, error) {
	first := func(list [][]string) any {
		for _, s := range list {
			if v, ok := x.pool.Get(s); ok && v != nil {
				return v
			}
		}
		return nil
	}
	cfg := x.n.cfg.(*aggregatorConfig)
	if cfg.groups != nil {
		outputs := map[string]any{}
		for _, grp := range cfg.groups {
			outputs[grp.name] = map[string]any{"output": first(grp.variables)}
		}
		return &outcome{outputs: outputs}, nil
	}
	return &outcome{outputs: map[string]any{"output": first(cfg.variables)}}, nil
}

// zeroOf is what "clear" leaves in a variable of a type.
func zeroOf(v any) any {
	switch TypeOf(v) {
	case TypeString:
		return ""
	case TypeNumber:
		return float64(0)
	case TypeBoolean:
		return false
	case TypeObject:
		return map[string]any{}
	case TypeNone:
		return nil
	}
	if _, ok := asList(v); ok {
		return []any{}
	}
	return nil
}

// runAssigner writes conversation variables: v1 (write_mode) or v2
// (items with operations).
func runAssigner(x *nodeRun) (*outcome, error) {
	type op struct {
		target []string
		kind   string
		value  any
		hasVal bool
	}
	var ops []op
	for _, c := range x.n.cfg.(*assignerConfig).ops {
		o := op{target: c.target, kind: c.kind}
		switch {
		case c.isConst:
			o.value, o.hasVal = c.constant, true
		case c.source != nil:
			o.value, o.hasVal = x.get(c.source), true
		}
		ops = append(ops, o)
	}
	updated := []any{}
	for _, o := range ops {
		if len(o.target) >= 2 && x.r.isLoopVar(o.target[0], o.target[1]) {
			// A loop variable of a running loop.
			cur, _ := x.pool.Get(o.target[:2])
			next, err := applyOperation(cur, o.kind, o.value, o.hasVal)
			if err != nil {
				return nil, nodeErr("VariableOperatorNodeError", "Assigning %s: %v", strings.Join(o.target, "."), err)
			}
			x.pool.Set(o.target[0], o.target[1], next)
			updated = append(updated, map[string]any{"name": o.target[1], "selector": o.target[:2], "value": next})
			continue
		}
		if len(o.target) < 2 || o.target[0] != ScopeConversation {
			return nil, nodeErr("VariableOperatorNodeError", "The assigner can only write conversation and loop variables, not %q.", strings.Join(o.target, "."))
		}
		name := o.target[1]
		if !x.r.convVars[name] {
			return nil, nodeErr("VariableOperatorNodeError", "The conversation variable %q does not exist.", name)
		}
		cur, _ := x.pool.Get(o.target)
		next, err := applyOperation(cur, o.kind, o.value, o.hasVal)
		if err != nil {
			return nil, nodeErr("VariableOperatorNodeError", "Assigning %s: %v", strings.Join(o.target, "."), err)
		}
		x.pool.Set(ScopeConversation, name, next)
		updated = append(updated, map[string]any{"name": name, "selector": o.target, "value": next})
	}
	return &outcome{process: map[string]any{"updated_variables": updated}, outputs: map[string]any{}}, nil
}

func applyOperation(cur any, kind string, val any, hasVal bool) (any, error) {
	need := func() error {
		if !hasVal {
			return fmt.Errorf("operation %q needs a value", kind)
		}
		return nil
	}
	switch kind {
	case "over-write", "set", "":
		if err := need(); err != nil {
			return nil, err
		}
		if cur != nil && val != nil && TypeOf(cur) != TypeOf(val) && !typeMatches(TypeOf(cur), val) {
			if c := coerce(TypeOf(cur), val); TypeOf(c) == TypeOf(cur) {
				return c, nil
			}
			return nil, fmt.Errorf("a %s value cannot hold a %s", TypeOf(cur), TypeOf(val))
		}
		return val, nil
	case "clear":
		return zeroOf(cur), nil
	case "append", "extend":
		if err := need(); err != nil {
			return nil, err
		}
		list, ok := asList(cur)
		if !ok && cur != nil {
			return nil, fmt.Errorf("%s needs an array variable", kind)
		}
		list = slices.Clone(list)
		if add, isList := asList(val); isList && kind == "extend" {
			return append(list, add...), nil
		}
		return append(list, val), nil
	case "+=", "-=", "*=", "/=":
		if err := need(); err != nil {
			return nil, err
		}
		a, ok1 := jsonnum.Number(cur)
		b, ok2 := jsonnum.Number(val)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%s needs numbers", kind)
		}
		switch kind {
		case "+=":
			return a + b, nil
		case "-=":
			return a - b, nil
		case "*=":
			return a * b, nil
		}
		if b == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		return a / b, nil
	case "remove-first", "remove-last":
		list, ok := asList(cur)
		if !ok {
			return nil, fmt.Errorf("%s needs an array variable", kind)
		}
		if len(list) == 0 {
			return []any{}, nil
		}
		if kind == "remove-first" {
			return slices.Clone(list[1:]), nil
		}
		return slices.Clone(list[:len(list)-1]), nil
	}
	return nil, fmt.Errorf("unknown operation %q", kind)
}

// Retriever searches knowledge bases for a knowledge-retrieval node. Each
// result item is {content, title, metadata{…}} as the DSL describes.
type Retriever interface {
	Retrieve(ctx context.Context, req RetrieveRequest) ([]map[string]any, error)
}

// RetrieveRequest is one knowledge-retrieval node's search.
type RetrieveRequest struct {
	AppID, UserID string
	Query         string
	DatasetIDs    []string
	// Mode is single or multiple; Config is the node's data as is
	// (top_k, score_threshold, reranking, metadata filters, …).
	Mode   string
	Config map[string]any
}

// runKnowledge asks the injected Retriever; without one the result is
// empty.
func runKnowledge(x *nodeRun) (*outcome, error) {
	query := Text(x.get(selectorOf(x.d["query_variable_selector"])))
	inputs := map[string]any{"query": query}
	result := []any{}
	if x.r.e.Retriever != nil && query != "" {
		var ids []string
		for _, id := range asAnyList(x.d["dataset_ids"]) {
			ids = append(ids, Text(id))
		}
		items, err := x.r.e.Retriever.Retrieve(x.ctx, RetrieveRequest{
			AppID: x.r.in.AppID, UserID: x.r.in.UserID, Query: query, DatasetIDs: ids,
			Mode: asString(x.d["retrieval_mode"]), Config: x.d,
		})
		if err != nil {
			return &outcome{inputs: inputs}, nodeErr("KnowledgeRetrievalNodeError", "Knowledge retrieval failed: %v", err)
		}
		for _, it := range items {
			result = append(result, it)
		}
	}
	return &outcome{inputs: inputs, outputs: map[string]any{"result": result}}, nil
}
