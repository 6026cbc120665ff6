package llm

import (
	"context"
	"io"
	"time"

	"appkb/internal/platform/apperr"
)

// Message roles understood by every backend.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of a conversation sent to a chat model.
//
// An assistant message may carry ToolCalls (the calls the model asked for);
// a tool message answers one of them and names it in ToolCallID.
type Message struct {
	Role       string
	Content    string
	Name       string
	ToolCallID string
	ToolCalls  []ToolCall
}

// Tool describes a function the model may ask to call. Parameters is a JSON
// Schema object; nil means "no arguments".
type Tool struct {
	Name string
	// Label is the name people see; only the builtin model reads it.
	Label       string
	Description string
	Parameters  map[string]any
}

// ToolCall is a request by the model to run a tool. Arguments is the JSON
// text the model produced, passed on unparsed.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// ChatRequest is one call to a chat model.
type ChatRequest struct {
	// Model overrides the model the ChatModel was looked up for. It goes
	// through the same alias mapping. Usually left empty.
	Model    string
	Messages []Message
	Tools    []Tool
	// Params are the app's completion parameters (temperature, top_p,
	// max_tokens, stop, presence_penalty, frequency_penalty, seed,
	// response_format, ...). Remote backends forward the standard ones and
	// those the provider entry lists in extra_params; the rest are dropped.
	Params map[string]any
	// Knowledge holds retrieved context snippets. The builtin model answers
	// from them. Remote models ignore this field: the caller is expected to
	// have put the context into the prompt already.
	Knowledge []string
}

// ChatResponse is a finished chat answer.
type ChatResponse struct {
	// Model is the model name the backend actually used (after alias mapping).
	Model        string
	Content      string
	ToolCalls    []ToolCall
	FinishReason string
	Usage        Usage
}

// Chunk is one piece of a streamed answer. Delta is text to append. Tool
// calls are never split across chunks: they arrive complete, once, in a
// chunk of their own after the last text delta.
type Chunk struct {
	Delta     string
	ToolCalls []ToolCall
}

// Usage reports the tokens and, when the provider entry lists prices for the
// model, the cost of one call. Prices are decimal text such as "0.0001500";
// they stay empty when no price is known. A unit price applies to
// PriceUnit tokens' worth: a unit price of "0.15" with a price unit of
// "0.000001" means 0.15 per million tokens.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int

	PromptUnitPrice     string
	PromptPriceUnit     string
	PromptPrice         string
	CompletionUnitPrice string
	CompletionPriceUnit string
	CompletionPrice     string
	TotalPrice          string
	Currency            string

	Latency time.Duration
}

// ChatModel generates answers.
type ChatModel interface {
	// Chat returns the whole answer at once.
	Chat(ctx context.Context, req ChatRequest) (*ChatResponse, error)
	// Stream calls onChunk for every piece of the answer as it arrives and
	// returns the assembled answer with its usage at the end. If onChunk
	// returns an error, streaming stops and that same error is returned.
	// A nil onChunk is allowed.
	Stream(ctx context.Context, req ChatRequest, onChunk func(Chunk) error) (*ChatResponse, error)
}

// Embedder turns texts into vectors, one per text, in input order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, Usage, error)
}

// RerankResult scores one document of a rerank call; Index points into the
// documents given.
type RerankResult struct {
	Index int
	Score float64
}

// Reranker orders documents by relevance to a query. Results are sorted by
// descending score; topN <= 0 returns all documents.
type Reranker interface {
	Rerank(ctx context.Context, query string, docs []string, topN int) ([]RerankResult, error)
}

// Transcriber turns speech into text. filename is used by the provider to
// guess the audio format, so keep its extension (".mp3", ".wav", ...).
type Transcriber interface {
	Transcribe(ctx context.Context, audio io.Reader, filename string) (string, error)
}

// Speech is synthesised audio. The caller must close Audio.
type Speech struct {
	ContentType string
	Audio       io.ReadCloser
}

// Speaker turns text into speech. An empty voice selects the provider
// entry's default voice.
type Speaker interface {
	Speak(ctx context.Context, text, voice string) (*Speech, error)
}

// ModerationResult says whether a text breaks a content policy and which
// categories it hit.
type ModerationResult struct {
	Flagged    bool
	Categories []string
}

// Moderator checks texts against a content policy.
type Moderator interface {
	Moderate(ctx context.Context, text string) (*ModerationResult, error)
}

// orDiscard lets Stream be called with a nil callback.
func orDiscard(onChunk func(Chunk) error) func(Chunk) error {
	if onChunk == nil {
		return func(Chunk) error { return nil }
	}
	return onChunk
}

// modelError builds the package's API error: always status 400.
func modelError(code string, cause error, format string, args ...any) *apperr.Error {
	return apperr.FailWith(cause, code, format, args...)
}
