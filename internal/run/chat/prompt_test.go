package chat

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"appkb/internal/apps"
	"appkb/internal/llm"
)

func TestRenderTemplate(t *testing.T) {
	tests := []struct {
		name string
		text string
		vars map[string]string
		want string
	}{
		{"plain text is unchanged", "Hello there", nil, "Hello there"},
		{"a variable is replaced", "Hi {{name}}!", map[string]string{"name": "Ada"}, "Hi Ada!"},
		{"every occurrence is replaced", "{{a}}-{{a}}", map[string]string{"a": "x"}, "x-x"},
		{"an unknown variable stays as written", "Hi {{nobody}}", map[string]string{"name": "Ada"}, "Hi {{nobody}}"},
		{"special names are replaced", "Q: {{#query#}} C: {{#context#}}", map[string]string{"#query#": "why", "#context#": "because"}, "Q: why C: because"},
		{"placeholders inside values are defused", "Hi {{name}}", map[string]string{"name": "{{secret}}", "secret": "s3"}, "Hi {secret}"},
		{"names longer than 30 characters are not variables", "{{a234567890123456789012345678901}}", map[string]string{"a234567890123456789012345678901": "x"}, "{{a234567890123456789012345678901}}"},
		{"spaces make it no placeholder", "{{ name }}", map[string]string{"name": "x"}, "{{ name }}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RenderTemplate(tc.text, tc.vars); got != tc.want {
				t.Errorf("RenderTemplate(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}

func msg(role, content string) llm.Message { return llm.Message{Role: role, Content: content} }

func TestBuildPrompt(t *testing.T) {
	history := []Turn{{"first question", "first answer"}, {"second question", "second answer"}}
	simple := &apps.ModelConfig{PrePrompt: "You help {{name}} in a {{tone}} tone.", PromptType: "simple"}
	advanced := &apps.ModelConfig{PromptType: "advanced"}
	advanced.ChatPromptConfig.Prompt = []apps.PromptMessage{
		{Role: "system", Text: "You are a concierge for {{traveller}} travellers."},
		{Role: "assistant", Text: "Ready."},
		{Role: "odd", Text: "Context: {{#context#}}"},
	}
	completionModel := &apps.ModelConfig{PrePrompt: "Be brief.", PromptType: "simple"}
	completionModel.Model.Mode = "completion"
	advancedCompletion := &apps.ModelConfig{PromptType: "advanced"}
	advancedCompletion.Model.Mode = "completion"
	advancedCompletion.CompletionPromptConfig.Prompt.Text = "Talk:\n{{#histories#}}\nU: {{#query#}}"
	advancedCompletion.CompletionPromptConfig.ConversationHistoriesRole.UserPrefix = "U"
	advancedCompletion.CompletionPromptConfig.ConversationHistoriesRole.AssistantPrefix = "A"

	tests := []struct {
		name   string
		params PromptParams
		want   []llm.Message
	}{
		{
			name: "simple chat: pre_prompt as system, history, query last",
			params: PromptParams{AppMode: apps.ModeChat, Config: simple, Query: "hello",
				Inputs: map[string]any{"name": "Ada", "tone": "warm"}, History: history},
			want: []llm.Message{
				msg("system", "You help Ada in a warm tone."),
				msg("user", "first question"), msg("assistant", "first answer"),
				msg("user", "second question"), msg("assistant", "second answer"),
				msg("user", "hello"),
			},
		},
		{
			name:   "simple chat without a pre_prompt has no system message",
			params: PromptParams{AppMode: apps.ModeChat, Config: &apps.ModelConfig{}, Query: "hello"},
			want:   []llm.Message{msg("user", "hello")},
		},
		{
			name: "simple completion: no query makes the pre_prompt the user message",
			params: PromptParams{AppMode: apps.ModeCompletion, Config: simple,
				Inputs: map[string]any{"name": "Bo", "tone": "formal"}},
			want: []llm.Message{msg("user", "You help Bo in a formal tone.")},
		},
		{
			name: "completion apps get no history",
			params: PromptParams{AppMode: apps.ModeCompletion, Config: simple, Query: "go",
				Inputs: map[string]any{"name": "Bo", "tone": "formal"}, History: history},
			want: []llm.Message{msg("system", "You help Bo in a formal tone."), msg("user", "go")},
		},
		{
			name: "numbers and booleans are written plainly",
			params: PromptParams{AppMode: apps.ModeCompletion, Config: &apps.ModelConfig{PrePrompt: "{{n}} words, formal: {{f}}"},
				Inputs: map[string]any{"n": 120.0, "f": true}},
			want: []llm.Message{msg("user", "120 words, formal: true")},
		},
		{
			name: "a missing value leaves the placeholder",
			params: PromptParams{AppMode: apps.ModeCompletion, Config: &apps.ModelConfig{PrePrompt: "About {{topic}}"},
				Inputs: map[string]any{}},
			want: []llm.Message{msg("user", "About {{topic}}")},
		},
		{
			name: "advanced chat: the app's messages, history, then the query",
			params: PromptParams{AppMode: apps.ModeChat, Config: advanced, Query: "Lisbon?",
				Inputs: map[string]any{"traveller": "solo"}, History: history[1:]},
			want: []llm.Message{
				msg("system", "You are a concierge for solo travellers."),
				msg("assistant", "Ready."),
				msg("user", "Context: "),
				msg("user", "second question"), msg("assistant", "second answer"),
				msg("user", "Lisbon?"),
			},
		},
		{
			name:   "simple chat on a completion model is one text with the turns",
			params: PromptParams{AppMode: apps.ModeChat, Config: completionModel, Query: "and now?", History: history[1:]},
			want: []llm.Message{msg("user", "Be brief.\n\n"+
				"Here is the conversation so far between the human and the assistant, between the <histories></histories> tags.\n\n"+
				"<histories>\nHuman: second question\nAssistant: second answer\n</histories>\n\n"+
				"\n\nHuman: and now?\n\nAssistant: ")},
		},
		{
			name:   "advanced completion model: history at {{#histories#}} with the app's prefixes",
			params: PromptParams{AppMode: apps.ModeChat, Config: advancedCompletion, Query: "q3", History: history},
			want: []llm.Message{msg("user",
				"Talk:\nU: first question\nA: first answer\nU: second question\nA: second answer\nU: q3")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := BuildPrompt(tc.params).Messages
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("messages differ\n got: %q\nwant: %q", got, tc.want)
			}
		})
	}
}

// TestHistoryWindow checks that the newest turns that fit are kept, and no
// more: the prompt fits the window and one more turn would not.
func TestHistoryWindow(t *testing.T) {
	var history []Turn
	for i := range 30 {
		history = append(history, Turn{
			Query:  fmt.Sprintf("question number %d about the weather in a city far away", i),
			Answer: fmt.Sprintf("answer number %d: %s", i, strings.Repeat("sunny and warm ", 5)),
		})
	}
	cfg := &apps.ModelConfig{PrePrompt: "You are a weather bot."}
	completionCfg := &apps.ModelConfig{PrePrompt: "You are a weather bot."}
	completionCfg.Model.Mode = "completion"

	tests := []struct {
		name     string
		cfg      *apps.ModelConfig
		window   int
		reserve  int
		wantAll  bool
		wantNone bool
	}{
		{"no window keeps everything", cfg, 0, 0, true, false},
		{"a huge window keeps everything", cfg, 1_000_000, 1000, true, false},
		{"a small window keeps some", cfg, 400, 50, false, false},
		{"a medium window keeps more", cfg, 900, 100, false, false},
		{"a window smaller than the prompt keeps none", cfg, 30, 0, false, true},
		{"the reserve counts against the window", cfg, 400, 380, false, true},
		{"completion models are trimmed too", completionCfg, 500, 50, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PromptParams{AppMode: apps.ModeChat, Config: tc.cfg, Query: "and tomorrow?", History: history,
				ContextWindow: tc.window, ReserveTokens: tc.reserve}
			got := BuildPrompt(p)
			switch {
			case tc.wantAll && got.HistoryTurns != len(history):
				t.Fatalf("kept %d turns, want all %d", got.HistoryTurns, len(history))
			case tc.wantNone && got.HistoryTurns != 0:
				t.Fatalf("kept %d turns, want none", got.HistoryTurns)
			case !tc.wantAll && !tc.wantNone && (got.HistoryTurns == 0 || got.HistoryTurns == len(history)):
				t.Fatalf("kept %d turns, want some but not all", got.HistoryTurns)
			}
			if tc.window == 0 {
				return
			}
			limit := tc.window - tc.reserve
			if n := llm.CountMessages(got.Messages); got.HistoryTurns > 0 && n > limit {
				t.Errorf("prompt has %d tokens, over the limit %d", n, limit)
			}
			if got.HistoryTurns < len(history) {
				// One more turn must not fit.
				more := p
				more.History = history[len(history)-got.HistoryTurns-1:]
				more.ContextWindow = 0
				if n := llm.CountMessages(BuildPrompt(more).Messages); n <= limit {
					t.Errorf("%d turns would still fit (%d ≤ %d tokens)", got.HistoryTurns+1, n, limit)
				}
			}
			// The kept turns are the newest ones.
			if got.HistoryTurns > 0 {
				text := fmt.Sprint(got.Messages)
				if !strings.Contains(text, history[len(history)-1].Query) {
					t.Error("the newest turn is missing")
				}
				if dropped := len(history) - got.HistoryTurns - 1; dropped >= 0 && strings.Contains(text, history[dropped].Query) {
					t.Errorf("turn %d should have been dropped", dropped)
				}
			}
		})
	}
}

func TestDefaultContextWindow(t *testing.T) {
	tests := map[string]int{
		"gpt-4o-mini": 128000, "gpt-4": 8192, "gpt-4-turbo-preview": 128000, "GPT-3.5-TURBO": 16385,
		"llama3.2": 128000, "llama3": 8192, "something-new": fallbackContextWindow, "": 8192, "builtin": 8192,
	}
	for model, want := range tests {
		if got := DefaultContextWindow(model); got != want {
			t.Errorf("DefaultContextWindow(%q) = %d, want %d", model, got, want)
		}
	}
}
