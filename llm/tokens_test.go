package llm

import (
	"strings"
	"testing"
)

func TestCountTokens(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"hello world", 2},
		{"tiktoken is great!", 6},
		{"antidisestablishmentarianism", 6},
		// Special tokens are plain text here, never a control token.
		{"<|endoftext|>", 7},
	}
	for _, tc := range tests {
		if got := CountTokens(tc.text); got != tc.want {
			t.Errorf("CountTokens(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func TestCountMessages(t *testing.T) {
	if got := CountMessages(nil); got != 0 {
		t.Errorf("no messages = %d, want 0", got)
	}
	// OpenAI's cookbook gives 9 + content for one user message with this
	// recipe: 3 per message, 1 for the role, 3 for the reply.
	one := []Message{{Role: RoleUser, Content: "hello world"}}
	if got, want := CountMessages(one), 3+1+2+3; got != want {
		t.Errorf("one message = %d, want %d", got, want)
	}
	named := []Message{{Role: RoleUser, Content: "hello world", Name: "ann"}}
	if got, want := CountMessages(named), CountMessages(one)+1+CountTokens("ann"); got != want {
		t.Errorf("named message = %d, want %d", got, want)
	}
	withCall := []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Name: "weather", Arguments: `{"city":"Paris"}`}}}}
	if got, want := CountMessages(withCall), 3+CountTokens("assistant")+3+CountTokens("weather")+CountTokens(`{"city":"Paris"}`)+3; got != want {
		t.Errorf("tool call message = %d, want %d", got, want)
	}
	long := strings.Repeat("word ", 1000)
	if got := CountMessages([]Message{{Role: RoleUser, Content: long}}); got <= 1000 {
		t.Errorf("long message = %d tokens, want more than 1000", got)
	}
}

func BenchmarkCountTokens(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 50)
	CountTokens("warm up") // load the vocabulary outside the timing
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		CountTokens(text)
	}
}
