package workflow

// EventReasoningChunk names the events that carry the reasoning of an llm
// node whose reasoning_format is "separated".
const EventReasoningChunk = "reasoning_chunk"

// ReasoningChunk is a piece of the text a model wrote inside
// <think>…</think>, sent while the model writes. Joining the pieces of a
// node gives its reasoning_content output. The piece that ends a block of
// reasoning has IsFinal set; its Reasoning may be empty.
type ReasoningChunk struct {
	Envelope
	Data ReasoningChunkData `json:"data"`
}

// ReasoningChunkData is the data of reasoning_chunk.
type ReasoningChunkData struct {
	Reasoning string  `json:"reasoning"`
	NodeID    *string `json:"node_id"`
	IsFinal   bool    `json:"is_final"`
}
