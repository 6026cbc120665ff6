package llm

import (
	"bytes"
	"encoding/json"

	"appkb/internal/platform/apperr"
)

// The body of a chat completion request is encoded here with
// encoding/json over small structs rather than through the SDK's
// parameter types: their reflective union encoder cost about a tenth of
// the CPU of a chat message (bench/README.md). The SDK still sends the
// request, retries it, decodes the answer and maps errors.

// chatBody is a chat completion request as the server receives it.
type chatBody struct {
	Model         string        `json:"model"`
	Messages      []wireMessage `json:"messages"`
	Tools         []wireTool    `json:"tools,omitempty"`
	Stream        bool          `json:"stream,omitempty"`
	StreamOptions *streamOpts   `json:"stream_options,omitempty"`
}

type streamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage is one message. Content is a pointer because an assistant
// message that only calls tools carries no content at all.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string       `json:"type"`
	Function wireToolSpec `json:"function"`
}

type wireToolSpec struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
}

// wireMessages converts messages to their wire form.
func wireMessages(msgs []Message) ([]wireMessage, error) {
	out := make([]wireMessage, len(msgs))
	for i, m := range msgs {
		content := m.Content
		w := wireMessage{Role: m.Role, Content: &content}
		switch m.Role {
		case RoleSystem, RoleUser:
			w.Name = m.Name
		case RoleDeveloper:
		case RoleAssistant:
			w.Name = m.Name
			if m.Content == "" && len(m.ToolCalls) > 0 {
				w.Content = nil
			}
			for _, tc := range m.ToolCalls {
				w.ToolCalls = append(w.ToolCalls, wireToolCall{ID: tc.ID, Type: "function",
					Function: wireFunction{Name: tc.Name, Arguments: tc.Arguments}})
			}
		case RoleTool:
			w.ToolCallID = m.ToolCallID
		default:
			return nil, modelError(apperr.CodeCompletionRequestError, nil, "Message role %q is not supported.", m.Role)
		}
		out[i] = w
	}
	return out, nil
}

// wireTools converts tool descriptions; a tool without parameters takes an
// empty object.
func wireTools(tools []Tool) []wireTool {
	out := make([]wireTool, 0, len(tools))
	for _, t := range tools {
		schema := t.Parameters
		if schema == nil {
			schema = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		out = append(out, wireTool{Type: "function", Function: wireToolSpec{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	return out
}

// encodeChatBody writes body with extra fields added at its top level.
// extra never holds a field body sets (see reservedParams).
func encodeChatBody(body chatBody, extra map[string]any) ([]byte, error) {
	base, err := marshalPlain(body)
	if err != nil {
		return nil, err
	}
	if len(extra) == 0 {
		return base, nil
	}
	more, err := marshalPlain(extra)
	if err != nil {
		return nil, modelError(apperr.CodeCompletionRequestError, err, "A completion parameter cannot be sent as JSON.")
	}
	if len(more) <= 2 { // "{}"
		return base, nil
	}
	out := make([]byte, 0, len(base)+len(more))
	out = append(out, base[:len(base)-1]...)
	out = append(out, ',')
	return append(out, more[1:]...), nil
}

// marshalPlain is json.Marshal without HTML escaping and without the
// trailing newline of an Encoder.
func marshalPlain(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// chatAnswer is the part of a chat completion answer that is read. The
// body is decoded once, into these fields only.
type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				ID       string       `json:"id"`
				Function wireFunction `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *answerUsage `json:"usage"`
}

// answerUsage is the token usage an answer or a stream reports.
type answerUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// chatChunk is the part of one chunk of a streamed chat completion that is
// read, decoded the same way as chatAnswer (the SDK's own chunk type
// decodes every field of it through reflection, several times the cost).
type chatChunk struct {
	Choices []struct {
		Index int64 `json:"index"`
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int64        `json:"index"`
				ID       string       `json:"id"`
				Function wireFunction `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *answerUsage `json:"usage"`
}
