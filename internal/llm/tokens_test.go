package llm

import (
	"strings"
	"testing"
	"unicode/utf8"
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

func TestCountTokensLongRuns(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		exact bool // whether the count must equal the unsplit encoder's
	}{
		{"ordinary text is exact", strings.Repeat("the quick brown fox ", 200), true},
		{"a run at the limit is exact", strings.Repeat("a", maxExactRun), true},
		{"a huge run is counted in slices", strings.Repeat("QmFzZTY0", 4096), false},
		{"multi-byte runs are cut on rune boundaries", strings.Repeat("日本語", 2000), false},
	}
	enc := loadEncoder()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parts := splitLongRuns(tc.text, maxExactRun)
			if strings.Join(parts, "") != tc.text {
				t.Fatal("splitting lost or changed text")
			}
			for _, p := range parts {
				if !utf8.ValidString(p) {
					t.Fatalf("a slice is not valid UTF-8: %q", p[:min(len(p), 16)])
				}
			}
			got := CountTokens(tc.text)
			want := len(enc.EncodeOrdinary(tc.text))
			if tc.exact && got != want {
				t.Errorf("CountTokens = %d, want exactly %d", got, want)
			}
			if !tc.exact && (got < want || got > want+len(parts)) {
				t.Errorf("CountTokens = %d, want within [%d, %d]", got, want, want+len(parts))
			}
		})
	}
}

// BenchmarkCountTokensLongWord measures a 64 KiB text without spaces, the
// case that was quadratic before runs were sliced.
func BenchmarkCountTokensLongWord(b *testing.B) {
	text := strings.Repeat("QmFzZTY0", 8192)
	loadEncoder()
	b.ResetTimer()
	for range b.N {
		CountTokens(text)
	}
}

// TestCountTokensMatchesEncoder checks that counting word by word (with
// remembered counts) gives exactly what the encoder gives for the whole
// text, on texts whose spacing, punctuation, digits and scripts exercise
// every rule of the pre-tokenizer. Each text is counted twice, the second
// time from memory.
func TestCountTokensMatchesEncoder(t *testing.T) {
	tests := []string{
		"Hello world, this is a test.",
		"  leading spaces and trailing   ",
		"tabs\tand\t\tnewlines\n\nin  between\r\n lines",
		"numbers 1234567 and 3.14159, 1,000,000 and 12ab34",
		"contractions: don't, I'm, we'll, they've, she'd, it's, YOU'RE",
		"punctuation!!! ... ?!? --- (brackets) [more] {braces} \"quotes\" 'single'",
		"end of sentence.\n\nNext paragraph.\n  Indented line;\n\tTabbed: yes",
		"unicode: café naïve résumé — em dash, “smart quotes”, 日本語のテキスト, 한국어, émoji 🙂🙂 ok",
		"ideographic\u3000space and no\u00a0break space before words",
		"code: func main() { fmt.Println(\"hi\") } // comment\n    return x+y*z;",
		"url https://example.com/path?q=1&r=two#frag and email a.b@example.org",
		"   \n\n   ",
		"a",
		" ",
		"x \n y",
	}
	enc := loadEncoder()
	if enc == nil {
		t.Skip("no vocabulary")
	}
	for _, text := range tests {
		want := len(enc.EncodeOrdinary(text))
		for round := range 2 {
			if got := CountTokens(text); got != want {
				t.Errorf("round %d: CountTokens(%q) = %d, encoder says %d", round, text, got, want)
			}
		}
	}
}
