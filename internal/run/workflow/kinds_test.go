package workflow

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestEveryNodeKindIsRegistered reads the kind names package apps declares
// and asks the registry for each, so that a kind added there without its
// row in nodeKinds fails here rather than as NotSupported in a run.
func TestEveryNodeKindIsRegistered(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../apps/graph.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, id := range vs.Names {
			if !strings.HasPrefix(id.Name, "Node") || i >= len(vs.Values) {
				continue
			}
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				kind, _ := strconv.Unquote(lit.Value)
				declared[kind] = true
				if k, ok := nodeKinds[kind]; !ok || k.run == nil {
					t.Errorf("apps.%s (%q) has no executor in nodeKinds", id.Name, kind)
				}
			}
		}
		return true
	})
	if len(declared) < 20 {
		t.Fatalf("read %d node kinds from apps/graph.go; the parse missed them", len(declared))
	}
	for kind := range nodeKinds {
		if !declared[kind] {
			t.Errorf("nodeKinds has %q, which package apps does not declare", kind)
		}
	}
}

// TestCompileConfigUsesTheRegistry checks that the decoder the registry
// names is the one that runs: a kind with a decoder gets its typed
// settings, one without keeps none, and an unknown kind compiles (it fails
// when it runs).
func TestCompileConfigUsesTheRegistry(t *testing.T) {
	tests := []struct {
		kind    string
		data    map[string]any
		wantCfg bool
	}{
		{"answer", map[string]any{"answer": "hi {{#sys.query#}}"}, true},
		{"end", map[string]any{}, true},
		{"code", map[string]any{"code": "x"}, false},
		{"no-such-kind", map[string]any{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			n := &gnode{id: "n1", kind: tc.kind, title: "N", data: tc.data}
			if err := compileConfig(n); err != nil {
				t.Fatal(err)
			}
			if got := n.cfg != nil; got != tc.wantCfg {
				t.Fatalf("cfg set = %v, want %v (%T)", got, tc.wantCfg, n.cfg)
			}
		})
	}
	n := &gnode{id: "n2", kind: "document-extractor", title: "D", data: map[string]any{}}
	if err := compileConfig(n); err == nil || n.cfg != nil {
		t.Fatalf("a document extractor without a variable compiled: err %v, cfg %v", err, n.cfg)
	}
}
