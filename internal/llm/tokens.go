package llm

import (
	"log/slog"
	"strings"
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

// LoadTokenizer loads the token vocabulary now rather than on the first
// count, so that no request waits for it; serve calls it as it starts.
func LoadTokenizer() { loadEncoder() }

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
		n += countPieces(enc, part)
	}
	return n
}

// countPieces counts the tokens of text word by word, remembering the
// count of each word. The encoder's pre-tokenizer never makes a piece that
// runs from a non-space character into a following space, so cutting the
// text just before every such space and encoding the parts one by one
// gives exactly the count of the whole; and short parts (" word,") repeat
// so often that most are counted from memory instead of by the encoder,
// whose regular expression and merge loop are slow.
func countPieces(enc *tiktoken.Tiktoken, text string) int {
	n, start := 0, 0
	for i := 1; i < len(text); i++ {
		if text[i] != ' ' {
			continue
		}
		if prev, _ := utf8.DecodeLastRuneInString(text[:i]); unicode.IsSpace(prev) {
			continue
		}
		n += pieceCount(enc, text[start:i])
		start = i
	}
	return n + pieceCount(enc, text[start:])
}

// maxCachedPiece is the longest part whose count is remembered.
const maxCachedPiece = 48

// pieceCounts remembers the token counts of short parts, in shards so
// that concurrent counting rarely waits; a full shard starts again empty.
var pieceCounts [64]struct {
	sync.Mutex
	m map[string]int32
}

const pieceShardSize = 8192

func pieceCount(enc *tiktoken.Tiktoken, piece string) int {
	if len(piece) > maxCachedPiece {
		return len(enc.EncodeOrdinary(piece))
	}
	h := uint32(2166136261)
	for i := 0; i < len(piece); i++ {
		h = (h ^ uint32(piece[i])) * 16777619
	}
	sh := &pieceCounts[h%uint32(len(pieceCounts))]
	sh.Lock()
	c, ok := sh.m[piece]
	sh.Unlock()
	if ok {
		return int(c)
	}
	c = int32(len(enc.EncodeOrdinary(piece)))
	sh.Lock()
	if sh.m == nil || len(sh.m) >= pieceShardSize {
		sh.m = make(map[string]int32, 256)
	}
	sh.m[strings.Clone(piece)] = c
	sh.Unlock()
	return int(c)
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
