package chat

import (
	"reflect"
	"testing"

	"appkb/internal/llm"
)

func TestWithInstructions(t *testing.T) {
	sys := llm.Message{Role: llm.RoleSystem, Content: "You help.\n"}
	user := llm.Message{Role: llm.RoleUser, Content: "q"}
	for _, tc := range []struct {
		name         string
		msgs         []llm.Message
		instructions string
		want         []llm.Message
	}{
		{"none", []llm.Message{sys, user}, "  ", []llm.Message{sys, user}},
		{"after the app's system message", []llm.Message{sys, user}, "Be brief.",
			[]llm.Message{{Role: llm.RoleSystem, Content: "You help.\n\nBe brief."}, user}},
		{"a system message of their own", []llm.Message{user}, "Be brief.",
			[]llm.Message{{Role: llm.RoleSystem, Content: "Be brief."}, user}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]llm.Message{}, tc.msgs...)
			if got := withInstructions(in, tc.instructions); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if !reflect.DeepEqual(in, tc.msgs) {
				t.Error("the prompt given was changed")
			}
		})
	}
}

func TestOverrideParams(t *testing.T) {
	app := map[string]any{"temperature": 0.7, "max_tokens": 512, "top_k": 3}
	got := overrideParams(app, map[string]any{"temperature": 0.1, "stop": []string{"END"}})
	want := map[string]any{"temperature": 0.1, "max_tokens": 512, "top_k": 3, "stop": []string{"END"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if app["temperature"] != 0.7 || len(app) != 3 {
		t.Errorf("the app's parameters were changed: %v", app)
	}
	if got := overrideParams(app, nil); !reflect.DeepEqual(got, app) {
		t.Errorf("no override: %v", got)
	}
}
