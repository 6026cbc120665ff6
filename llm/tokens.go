package llm

import (
	"log/slog"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// tokenEncoding is the BPE vocabulary used to count tokens for every model.
// It is the one of the GPT-3.5/GPT-4 family; other models tokenise
// differently, so counts for them are estimates.
const tokenEncoding = "cl100k_base"

var (
	encoderOnce sync.Once
	encoder     *tiktoken.Tiktoken
)

// loadEncoder reads the vocabulary embedded in tiktoken-go-loader. Nothing is
// downloaded. The vocabulary takes a few hundred milliseconds to load, so it
// is loaded on first use and then shared.
func loadEncoder() *tiktoken.Tiktoken {
	encoderOnce.Do(func() {
		tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
		enc, err := tiktoken.GetEncoding(tokenEncoding)
		if err != nil {
			// Cannot happen with the embedded files; CountTokens then estimates.
			slog.Error("llm: cannot load the token vocabulary; token counts are estimates", "encoding", tokenEncoding, "err", err)
			return
		}
		encoder = enc
	})
	return encoder
}

// CountTokens returns the number of cl100k_base tokens in text. Special
// tokens such as "<|endoftext|>" are counted as ordinary text.
func CountTokens(text string) int {
	if text == "" {
		return 0
	}
	enc := loadEncoder()
	if enc == nil {
		return (utf8.RuneCountInString(text) + 3) / 4
	}
	n := 0
	for _, part := range splitLongRuns(text, maxExactRun) {
		n += len(enc.EncodeOrdinary(part))
	}
	return n
}

// maxExactRun bounds the length, in bytes, of a run of non-space characters
// that is counted exactly. The encoder's merge step is quadratic in the
// length of one such run, so a single huge "word" (base64, a pasted blob)
// could otherwise take minutes; longer runs are counted slice by slice, which
// may differ from the exact count by about one token per slice.
const maxExactRun = 512

// splitLongRuns cuts text inside runs of non-space characters longer than
// max bytes, on rune boundaries. Text without such runs comes back whole, so
// ordinary text is counted exactly.
func splitLongRuns(text string, max int) []string {
	var parts []string
	start, run := 0, 0
	for i, r := range text {
		if unicode.IsSpace(r) {
			run = 0
			continue
		}
		if run >= max {
			parts = append(parts, text[start:i])
			start, run = i, 0
		}
		run += utf8.RuneLen(r)
	}
	return append(parts, text[start:])
}

// Token overheads of the chat format, from OpenAI's published counting
// recipe for its chat models.
const (
	tokensPerMessage = 3 // start marker, role separator, end marker
	tokensPerName    = 1
	tokensForReply   = 3 // the assistant turn the model is primed with
)

// CountMessages estimates the prompt tokens a chat model is charged for the
// given messages: for each message its role, content, name, tool call id and
// tool calls (name and arguments), plus a fixed overhead per message and for
// the reply. It returns 0 for no messages.
func CountMessages(msgs []Message) int {
	if len(msgs) == 0 {
		return 0
	}
	n := tokensForReply
	for _, m := range msgs {
		n += tokensPerMessage + CountTokens(m.Role) + CountTokens(m.Content)
		if m.Name != "" {
			n += tokensPerName + CountTokens(m.Name)
		}
		n += CountTokens(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			n += tokensPerMessage + CountTokens(tc.Name) + CountTokens(tc.Arguments)
		}
	}
	return n
}
