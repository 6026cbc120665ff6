package pipeline

import (
	"testing"

	"appkb/internal/platform/apperr"
)

func TestParseDSL(t *testing.T) {
	tests := []struct {
		name, file string
		ok         bool
	}{
		{"a pipeline", "kind: rag_pipeline\nworkflow:\n  graph:\n    nodes:\n    - {id: s, data: {type: datasource, provider_type: local_file}}\n", true},
		{"an app", "kind: app\napp: {name: x, mode: workflow}\n", false},
		{"no data source", "kind: rag_pipeline\nworkflow:\n  graph:\n    nodes:\n    - {id: s, data: {type: code}}\n", false},
		{"no graph", "kind: rag_pipeline\n", false},
		{"not YAML", "kind: [", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDSL([]byte(tc.file))
			if tc.ok != (err == nil) || (err != nil && !apperr.Is(err, apperr.CodeInvalidParam)) {
				t.Fatalf("error %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestChunkText(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"text", "plain", "plain"},
		{"list", []any{"a", "b"}, "a\n\nb"},
		{"general chunks", map[string]any{"general_chunks": []any{"x", "y"}}, "x\n\ny"},
		{"parent-child", map[string]any{"parent_child_chunks": []any{map[string]any{"parent_content": "p"}}}, "p"},
		{"qa", map[string]any{"qa_chunks": []any{map[string]any{"question": "q", "answer": "a"}}}, "q\na"},
		{"other", map[string]any{"n": 1.0}, `{"n":1}`},
	}
	for _, tc := range tests {
		if got := chunkText(tc.in); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPageNames(t *testing.T) {
	tests := []struct{ html, title, name string }{
		{`<html><head><TITLE lang="en"> Parking
			guide </TITLE></head></html>`, "Parking guide", "Parking guide"},
		{`<p>no title</p>`, "", "page"},
		{`<title>a/b\c</title>`, `a/b\c`, "a-b-c"},
	}
	for _, tc := range tests {
		if got := htmlTitle(tc.html); got != tc.title {
			t.Errorf("htmlTitle(%q) = %q, want %q", tc.html, got, tc.title)
		}
		if got := safeName(htmlTitle(tc.html)); got != tc.name {
			t.Errorf("safeName = %q, want %q", got, tc.name)
		}
	}
}
