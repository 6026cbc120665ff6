package workflow

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Reserved first segments of selectors.
const (
	ScopeSys          = "sys"
	ScopeEnv          = "env"
	ScopeConversation = "conversation"
	// ScopeRAG holds a knowledge pipeline's variables: rag.shared.NAME for
	// those of the whole pipeline, rag.NODE.NAME for a data source's own.
	ScopeRAG = "rag"
)

// Pool holds the variables of one run: system variables, environment and
// conversation variables, and every output of the nodes that have run,
// addressed by selectors [scope-or-node-id, name, path...]. It is safe for
// concurrent use.
type Pool struct {
	mu      sync.RWMutex
	vars    map[string]map[string]any
	secrets map[string]bool
}

// NewPool returns an empty pool.
func NewPool() *Pool {
	return &Pool{vars: map[string]map[string]any{}, secrets: map[string]bool{}}
}

// Set stores one variable.
func (p *Pool) Set(scope, name string, v any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.vars[scope]
	if m == nil {
		m = map[string]any{}
		p.vars[scope] = m
	}
	m[name] = v
}

// SetSecret stores an environment variable whose value must never appear
// in logs, events or errors.
func (p *Pool) SetSecret(name string, v any) {
	p.Set(ScopeEnv, name, v)
	p.mu.Lock()
	p.secrets[name] = true
	p.mu.Unlock()
}

// IsSecret reports whether the selector points at a secret variable.
func (p *Pool) IsSecret(sel []string) bool {
	if len(sel) < 2 || sel[0] != ScopeEnv {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.secrets[sel[1]]
}

// SetAll stores the outputs of a node under its id.
func (p *Pool) SetAll(nodeID string, outputs map[string]any) {
	for k, v := range outputs {
		p.Set(nodeID, k, v)
	}
}

// Drop forgets every variable of one scope or node.
func (p *Pool) Drop(scope string) {
	p.mu.Lock()
	delete(p.vars, scope)
	p.mu.Unlock()
}

// Scope returns a copy of the variables of one scope or node.
func (p *Pool) Scope(scope string) map[string]any {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make(map[string]any, len(p.vars[scope]))
	for k, v := range p.vars[scope] {
		out[k] = v
	}
	return out
}

// Get resolves a selector. Segments after the name walk into objects, file
// attributes (url, name, size, …) and, for arrays, "length" or an index.
func (p *Pool) Get(sel []string) (any, bool) {
	if len(sel) < 2 {
		return nil, false
	}
	p.mu.RLock()
	v, ok := p.vars[sel[0]][sel[1]]
	p.mu.RUnlock()
	if !ok {
		return nil, false
	}
	for _, seg := range sel[2:] {
		v, ok = walk(v, seg)
		if !ok {
			return nil, false
		}
	}
	return v, true
}

func walk(v any, seg string) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		if f, ok := FileFromMap(x); ok && x["dify_model_identity"] == FileIdentity {
			return f.Attr(seg)
		}
		e, ok := x[seg]
		return e, ok
	case File:
		return x.Attr(seg)
	case *File:
		return x.Attr(seg)
	}
	if list, ok := asList(v); ok {
		if seg == "length" {
			return float64(len(list)), true
		}
		if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(list) {
			return list[i], true
		}
	}
	return nil, false
}

// templateRef matches {{#node.name#}} references: a node part of up to 50
// word characters, then one to ten dotted names.
var templateRef = regexp.MustCompile(`\{\{#([a-zA-Z0-9_]{1,50}(?:\.[a-zA-Z_][a-zA-Z0-9_]{0,29}){1,10})#\}\}`)

// segment is a piece of a template: literal text or a selector.
type segment struct {
	text string
	sel  []string
}

// parseTemplate splits a {{#…#}} template into literal and variable
// segments.
func parseTemplate(s string) []segment {
	var out []segment
	last := 0
	for _, m := range templateRef.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > last {
			out = append(out, segment{text: s[last:m[0]]})
		}
		out = append(out, segment{sel: strings.Split(s[m[2]:m[3]], ".")})
		last = m[1]
	}
	if last < len(s) {
		out = append(out, segment{text: s[last:]})
	}
	return out
}

// renderSegment gives the text of one segment. A reference that does not
// resolve shows as its bare dotted path.
func (p *Pool) renderSegment(sg segment) string {
	if sg.sel == nil {
		return sg.text
	}
	v, ok := p.Get(sg.sel)
	if !ok {
		return strings.Join(sg.sel, ".")
	}
	return Text(v)
}

// Render replaces every {{#…#}} reference in s by the text of its value.
func (p *Pool) Render(s string) string {
	if !strings.Contains(s, "{{#") {
		return s
	}
	var b strings.Builder
	for _, sg := range parseTemplate(s) {
		b.WriteString(p.renderSegment(sg))
	}
	return b.String()
}

// Redact replaces the values of secret environment variables in s by
// asterisks, for text that leaves the engine (errors, logs).
func (p *Pool) Redact(s string) string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for name := range p.secrets {
		if v := Text(p.vars[ScopeEnv][name]); len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "******")
		}
	}
	return s
}

// selectorOf reads a selector from DSL data ([]any of strings).
func selectorOf(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, Text(e))
		}
		return out
	case string:
		if x == "" {
			return nil
		}
		return strings.Split(x, ".")
	}
	return nil
}

// redactValue masks secrets inside a JSON-like value (see Redact).
func (p *Pool) redactValue(v any) any {
	switch x := v.(type) {
	case string:
		return p.Redact(x)
	case []any:
		for i, e := range x {
			x[i] = p.redactValue(e)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = p.redactValue(e)
		}
	}
	return v
}

// redactMap masks secrets in an event payload map (already a copy).
func (p *Pool) redactMap(m map[string]any) map[string]any {
	p.mu.RLock()
	none := len(p.secrets) == 0
	p.mu.RUnlock()
	if none || m == nil {
		return m
	}
	return p.redactValue(m).(map[string]any)
}

// ---------------------------------------------------------------------
// Round scopes. A parallel iteration runs each round against a pool of its
// own so that rounds cannot see or clobber each other's inner outputs.
// The functions below only add to Pool; nothing above depends on them.
// ---------------------------------------------------------------------

// fork returns a new pool that starts with every variable p holds now,
// secrets included. Scope maps are copied, values are shared: values in a
// pool are replaced, never changed in place, so sharing them is safe.
// Writes to the fork never reach p; writeBack (nodes_container.go) copies
// back the ones that must.
func (p *Pool) fork() *Pool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	c := &Pool{vars: make(map[string]map[string]any, len(p.vars)+4), secrets: make(map[string]bool, len(p.secrets))}
	for scope, m := range p.vars {
		cm := make(map[string]any, len(m))
		for k, v := range m {
			cm[k] = v
		}
		c.vars[scope] = cm
	}
	for k, v := range p.secrets {
		c.secrets[k] = v
	}
	return c
}
