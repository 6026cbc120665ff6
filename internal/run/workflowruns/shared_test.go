package workflowruns

import (
	"strings"
	"testing"
)

func TestOnceStoreShortensRepeatedTexts(t *testing.T) {
	long := strings.Repeat("a", shareAbove)
	other := strings.Repeat("b", shareAbove+10)
	short := "hello"
	var o onceStore
	steps := []struct {
		name      string
		in        map[string]any
		place     string
		wantWhole []string // keys whose value must stay as given
		wantShort []string // keys whose value must be a preview
	}{
		{"first record keeps its texts whole", map[string]any{"text": long, "s": short}, "outputs of node A", []string{"text", "s"}, nil},
		{"a later record keeps a preview of the same text", map[string]any{"text": long, "new": other, "s": short}, "inputs of node B", []string{"new", "s"}, []string{"text"}},
		{"the text first seen in B is a preview after it", map[string]any{"again": other}, "outputs of node B", nil, []string{"again"}},
		{"inside lists and maps too", map[string]any{"list": []any{long}, "obj": map[string]any{"x": other}}, "outputs of node C", nil, nil},
	}
	for _, st := range steps {
		got := o.shortenMap(st.in, st.place)
		for _, k := range st.wantWhole {
			if got[k] != st.in[k] {
				t.Errorf("%s: %s changed", st.name, k)
			}
		}
		for _, k := range st.wantShort {
			s, _ := got[k].(string)
			if len(s) > previewBytes+200 || !strings.Contains(s, "stored whole in the") {
				t.Errorf("%s: %s is %d bytes, want a preview", st.name, k, len(s))
			}
		}
	}
	// The nested case: the copies are previews, and the input maps were
	// not changed (events share them).
	in := map[string]any{"list": []any{long}, "obj": map[string]any{"x": other}}
	got := o.shortenMap(in, "outputs of node D")
	if s := got["list"].([]any)[0].(string); !strings.Contains(s, "[4096 bytes; the same text is stored whole in the outputs of node A]") {
		t.Errorf("nested list item %q", s)
	}
	if s := got["obj"].(map[string]any)["x"].(string); !strings.Contains(s, "inputs of node B") {
		t.Errorf("nested map value %.300q", s)
	}
	if in["list"].([]any)[0] != long || in["obj"].(map[string]any)["x"] != other {
		t.Error("the given maps were changed")
	}
	if o.shortenMap(nil, "x") != nil {
		t.Error("nil part became non-nil")
	}
}
