package chat

import (
	"time"

	"appkb/internal/llm"
	"appkb/models"
)

// Event is one payload of a message stream. Its JSON encoding is exactly the
// object that goes after "data: " on the wire; EventName is the value of its
// "event" member.
type Event interface {
	EventName() string
}

// Names of the stream events this package produces.
const (
	EventMessage        = "message"
	EventAgentMessage   = "agent_message"
	EventAgentThought   = "agent_thought"
	EventMessageEnd     = "message_end"
	EventMessageReplace = "message_replace"
	EventMessageFile    = "message_file"
	EventError          = "error"
	EventPing           = "ping"
)

// StreamBase holds the members that every event of one answer repeats.
// ConversationID stays empty (and is left out) for completion apps.
type StreamBase struct {
	TaskID         string `json:"task_id"`
	MessageID      string `json:"message_id"`
	ConversationID string `json:"conversation_id,omitempty"`
	CreatedAt      int64  `json:"created_at"`
}

// MessageEvent carries the next piece of the answer. Agent apps send the
// same payload under the name agent_message.
type MessageEvent struct {
	Event string `json:"event"`
	// ID repeats the message id, as Dify does.
	ID string `json:"id"`
	StreamBase
	Answer string `json:"answer"`
}

func (e MessageEvent) EventName() string { return e.Event }

// MessageEndEvent closes a successful answer.
type MessageEndEvent struct {
	Event string `json:"event"`
	ID    string `json:"id"`
	StreamBase
	Metadata Metadata `json:"metadata"`
	// Files would list the files the app produced for the answer (tool
	// output); no app produces any yet, so it is always null.
	Files []map[string]any `json:"files"`
}

func (MessageEndEvent) EventName() string { return EventMessageEnd }

// MessageReplaceEvent replaces everything streamed so far, which happens
// when output moderation withholds the answer.
type MessageReplaceEvent struct {
	Event string `json:"event"`
	StreamBase
	Answer string `json:"answer"`
	Reason string `json:"reason"`
}

func (MessageReplaceEvent) EventName() string { return EventMessageReplace }

// MessageFileEvent announces a file the app produced for the answer.
type MessageFileEvent struct {
	Event string `json:"event"`
	ID    string `json:"id"`
	StreamBase
	Type      string `json:"type"`
	BelongsTo string `json:"belongs_to"`
	URL       string `json:"url"`
}

func (MessageFileEvent) EventName() string { return EventMessageFile }

// AgentThoughtEvent reports one step of an agent. Agent apps send one when
// a step begins and again, filled in, when it is over.
type AgentThoughtEvent struct {
	Event string `json:"event"`
	ID    string `json:"id"`
	StreamBase
	Position     int            `json:"position"`
	Thought      string         `json:"thought"`
	Observation  string         `json:"observation"`
	Tool         string         `json:"tool"`
	ToolLabels   map[string]any `json:"tool_labels"`
	ToolInput    string         `json:"tool_input"`
	MessageFiles []string       `json:"message_files"`
}

func (AgentThoughtEvent) EventName() string { return EventAgentThought }

// ErrorEvent reports a failure after the stream has begun; the stream ends
// after it. Like Dify, it carries no task id.
type ErrorEvent struct {
	Event          string `json:"event"`
	MessageID      string `json:"message_id,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
	CreatedAt      int64  `json:"created_at,omitempty"`
	Status         int    `json:"status"`
	Code           string `json:"code"`
	Message        string `json:"message"`
}

func (ErrorEvent) EventName() string { return EventError }

// Metadata accompanies a finished answer, in message_end and in blocking
// responses.
type Metadata struct {
	Usage              Usage               `json:"usage"`
	RetrieverResources []RetrieverResource `json:"retriever_resources"`
	// AnnotationReply is set when a stored annotation answered instead of
	// the model.
	AnnotationReply *AnnotationReply `json:"annotation_reply,omitempty"`
}

// AnnotationReply names the annotation that answered.
type AnnotationReply struct {
	ID string `json:"id"`
}

// Usage is the wire form of a model call's token counts, prices and
// latency. Prices are decimal text; when the model has no known prices they
// are "0" and the currency is USD, which is what Dify reports in that case.
type Usage struct {
	PromptTokens        int     `json:"prompt_tokens"`
	PromptUnitPrice     string  `json:"prompt_unit_price"`
	PromptPriceUnit     string  `json:"prompt_price_unit"`
	PromptPrice         string  `json:"prompt_price"`
	CompletionTokens    int     `json:"completion_tokens"`
	CompletionUnitPrice string  `json:"completion_unit_price"`
	CompletionPriceUnit string  `json:"completion_price_unit"`
	CompletionPrice     string  `json:"completion_price"`
	TotalTokens         int     `json:"total_tokens"`
	TotalPrice          string  `json:"total_price"`
	Currency            string  `json:"currency"`
	Latency             float64 `json:"latency"`
	// known is false when no price was reported; the stored message then
	// keeps its price and currency null.
	known bool
}

// wireUsage converts the model layer's usage, filling unknown prices with
// zeros.
func wireUsage(u llm.Usage, latency time.Duration) Usage {
	orZero := func(s string) string {
		if s == "" {
			return "0"
		}
		return s
	}
	out := Usage{
		PromptTokens:        u.PromptTokens,
		PromptUnitPrice:     orZero(u.PromptUnitPrice),
		PromptPriceUnit:     orZero(u.PromptPriceUnit),
		PromptPrice:         orZero(u.PromptPrice),
		CompletionTokens:    u.CompletionTokens,
		CompletionUnitPrice: orZero(u.CompletionUnitPrice),
		CompletionPriceUnit: orZero(u.CompletionPriceUnit),
		CompletionPrice:     orZero(u.CompletionPrice),
		TotalTokens:         u.TotalTokens,
		TotalPrice:          orZero(u.TotalPrice),
		Currency:            u.Currency,
		Latency:             latency.Seconds(),
		known:               u.TotalPrice != "",
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	if out.Currency == "" {
		out.Currency = "USD"
	}
	return out
}

// RetrieverResource is one knowledge chunk an answer cites (the stored and
// wire shape is models.RetrieverResource); Config.Retrieve supplies them.
type RetrieverResource = models.RetrieverResource

// BlockingResponse is the answer of a blocking call: ChatCompletionResponse
// for chat apps, CompletionResponse (no conversation_id) for text
// generators.
type BlockingResponse struct {
	Event          string   `json:"event"`
	TaskID         string   `json:"task_id"`
	ID             string   `json:"id"`
	MessageID      string   `json:"message_id"`
	ConversationID string   `json:"conversation_id,omitempty"`
	Mode           string   `json:"mode"`
	Answer         string   `json:"answer"`
	Metadata       Metadata `json:"metadata"`
	CreatedAt      int64    `json:"created_at"`
}
