package chat

import (
	"reflect"
	"strings"
	"testing"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
)

func intp(n int) *int { return &n }

func TestValidateInputs(t *testing.T) {
	form := []apps.FormField{
		{Kind: apps.FieldTextInput, Variable: "name", Required: true, MaxLength: intp(5)},
		{Kind: apps.FieldParagraph, Variable: "notes", Default: "none"},
		{Kind: apps.FieldSelect, Variable: "tone", Options: []string{"warm", "formal"}, Default: "warm"},
		{Kind: apps.FieldNumber, Variable: "words", Default: 120},
		{Kind: apps.FieldCheckbox, Variable: "short"},
		{Kind: apps.FieldJSONObject, Variable: "extra"},
		{Kind: apps.FieldExternalDataTool, Variable: "budget", Required: true},
	}
	defaults := map[string]any{"notes": "none", "tone": "warm", "words": 120.0, "short": false, "extra": "", "budget": ""}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range defaults {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}

	tests := []struct {
		name    string
		inputs  map[string]any
		want    map[string]any
		wantErr string // the variable the message must start with
	}{
		{"only the required field", map[string]any{"name": "Ada"}, with("name", "Ada"), ""},
		{"unknown keys are dropped", map[string]any{"name": "Ada", "zzz": 1}, with("name", "Ada"), ""},
		{"a number given as text", map[string]any{"name": "Ada", "words": "42.5"}, with("name", "Ada", "words", 42.5), ""},
		{"a number", map[string]any{"name": "Ada", "words": 7.0}, with("name", "Ada", "words", 7.0), ""},
		{"a select option", map[string]any{"name": "Ada", "tone": "formal"}, with("name", "Ada", "tone", "formal"), ""},
		{"a checkbox as text", map[string]any{"name": "Ada", "short": "true"}, with("name", "Ada", "short", true), ""},
		{"a JSON object as text", map[string]any{"name": "Ada", "extra": `{"a":1}`}, with("name", "Ada", "extra", map[string]any{"a": 1.0}), ""},
		{"max_length counts characters, not bytes", map[string]any{"name": "Zoë✓!"}, with("name", "Zoë✓!"), ""},
		{"null counts as absent", map[string]any{"name": "Ada", "tone": nil}, with("name", "Ada"), ""},
		{"missing required field", map[string]any{}, nil, "name"},
		{"empty required field", map[string]any{"name": ""}, nil, "name"},
		{"text that is not a string", map[string]any{"name": 12.0}, nil, "name"},
		{"text over max_length", map[string]any{"name": "toolong"}, nil, "name"},
		{"option not offered", map[string]any{"name": "Ada", "tone": "rude"}, nil, "tone"},
		{"number that is not one", map[string]any{"name": "Ada", "words": "many"}, nil, "words"},
		{"number of the wrong type", map[string]any{"name": "Ada", "words": true}, nil, "words"},
		{"checkbox that is not a boolean", map[string]any{"name": "Ada", "short": "perhaps"}, nil, "short"},
		{"JSON object that is not one", map[string]any{"name": "Ada", "extra": "[1,2]"}, nil, "extra"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ValidateInputs(form, tc.inputs)
			if tc.wantErr != "" {
				if !apperr.Is(err, apperr.CodeInvalidParam) {
					t.Fatalf("err = %v, want invalid_param", err)
				}
				if msg := apperr.From(err).Message; !strings.HasPrefix(msg, tc.wantErr+" ") {
					t.Errorf("message %q does not name %s", msg, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestKeywordFilter(t *testing.T) {
	m := &apps.Moderation{Enabled: true, Type: "keywords", Config: map[string]any{
		"keywords":       "Counterfeit\n\n replica ",
		"inputs_config":  map[string]any{"enabled": true, "preset_response": "No."},
		"outputs_config": map[string]any{"enabled": true},
	}}
	f := newKeywordFilter(m)
	if f == nil {
		t.Fatal("filter is off")
	}
	tests := []struct {
		name   string
		query  string
		inputs map[string]any
		hit    bool
	}{
		{"clean query", "a nice bag", nil, false},
		{"keyword in the query, any case", "a COUNTERFEIT bag", nil, true},
		{"keyword in an input", "a bag", map[string]any{"p": "Replica watch"}, true},
		{"keyword inside a number input does not apply", "a bag", map[string]any{"n": 3.0}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reply, hit := f.checkInputs(tc.query, tc.inputs)
			if hit != tc.hit || (hit && reply != "No.") {
				t.Errorf("checkInputs = %q, %v; want hit %v", reply, hit, tc.hit)
			}
		})
	}
	if reply, hit := f.checkOutput("this is a replica"); !hit || reply != defaultOutputPreset {
		t.Errorf("checkOutput = %q, %v; want the default preset", reply, hit)
	}
	for _, off := range []*apps.Moderation{
		nil,
		{Enabled: false, Type: "keywords", Config: m.Config},
		{Enabled: true, Type: "openai_moderation", Config: m.Config},
		{Enabled: true, Type: "keywords", Config: map[string]any{"keywords": "x"}},
	} {
		if newKeywordFilter(off) != nil {
			t.Errorf("filter should be off for %+v", off)
		}
	}
}

func TestFirstWords(t *testing.T) {
	tests := map[string]string{
		"":                      DefaultConversationName,
		"   ":                   DefaultConversationName,
		"hello":                 "hello",
		"  what   is\tappkb?  ": "what is appkb?",
		"one two three four five six seven eight nine ten":                                  "one two three four five six seven eight",
		strings.Repeat("x", 100):                                                            strings.Repeat("x", nameMaxRunes),
		"supercalifragilistic expialidocious supercalifragilistic expialidocious even more": "supercalifragilistic expialidocious supercalifragilistic",
	}
	for in, want := range tests {
		if got := FirstWords(in); got != want {
			t.Errorf("FirstWords(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSuggestions(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`["a?","b?","c?"]`, []string{"a?", "b?", "c?"}},
		{"Sure:\n```json\n[\"a?\", \" b? \", \"\", \"c?\", \"d?\"]\n```", []string{"a?", "b?", "c?"}},
		{"no list here", []string{}},
		{`[1, "ok?"]`, []string{"ok?"}},
		{`[broken`, []string{}},
	}
	for _, tc := range tests {
		if got := parseSuggestions(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseSuggestions(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
