package oaicompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
)

// Request is the part of a chat completions request that appkb reads.
type Request struct {
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	Stream        bool      `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	User                string          `json:"user"`
	// ConversationID and Inputs are appkb's extensions.
	ConversationID string         `json:"conversation_id"`
	Inputs         map[string]any `json:"inputs"`
}

// IncludeUsage reports whether a stream should end with a usage chunk.
func (r *Request) IncludeUsage() bool { return r.StreamOptions != nil && r.StreamOptions.IncludeUsage }

// Message is one message of the request.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentPart is one element of a content list.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// Roles of messages.
const (
	roleSystem    = "system"
	roleDeveloper = "developer"
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"
	roleFunction  = "function"
)

// DecodeRequest reads a request body.
func DecodeRequest(body []byte) (*Request, error) {
	var r Request
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, apperr.InvalidParam("request body is not valid JSON: %v", err)
	}
	return &r, nil
}

// content reads a message's content: its text (text parts joined by
// newlines) and the images it attaches by http(s) URL.
func (m Message) content() (string, []File, error) {
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, apperr.InvalidParam("messages: content is not a string: %v", err)
		}
		return s, nil, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, apperr.InvalidParam("messages: content must be a string or a list of parts")
	}
	var texts []string
	var files []File
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text":
			texts = append(texts, p.Text)
		case "image_url":
			if p.ImageURL == nil {
				continue
			}
			u := p.ImageURL.URL
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				return "", nil, apperr.InvalidParam("messages: images are accepted by http(s) URL only; upload the file with POST /v1/files/upload and use /v1/chat-messages for local files")
			}
			files = append(files, File{Type: "image", URL: u})
		}
	}
	return strings.Join(texts, "\n"), files, nil
}

// params are the model parameters the request overrides.
func (r *Request) params() (map[string]any, error) {
	out := map[string]any{}
	if r.Temperature != nil {
		out["temperature"] = *r.Temperature
	}
	if r.TopP != nil {
		out["top_p"] = *r.TopP
	}
	switch {
	case r.MaxCompletionTokens != nil:
		out["max_tokens"] = *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		out["max_tokens"] = *r.MaxTokens
	}
	if stop := bytes.TrimSpace(r.Stop); len(stop) > 0 && !bytes.Equal(stop, []byte("null")) {
		var one string
		var list []string
		switch {
		case json.Unmarshal(stop, &one) == nil:
			list = []string{one}
		case json.Unmarshal(stop, &list) == nil:
		default:
			return nil, apperr.InvalidParam("stop must be a string or a list of strings")
		}
		if len(list) > 0 {
			out["stop"] = list
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// BuildTurn maps a request onto a turn of app:
//
//   - system and developer messages, wherever they stand, become the
//     turn's Instructions;
//   - the last user message is the query: of chat, agent and chatflow
//     apps as it is; of completion apps it fills the `query` input, else
//     the first paragraph input, else the first text input (else it is
//     sent as the query); of workflow apps it fills the first text or
//     paragraph input of the start node;
//   - for chat-like apps the user and assistant messages before it are
//     the history (tool and function results count as user text), unless
//     conversation_id names a stored conversation, whose history is used
//     instead;
//   - inputs given in the request win over the filled one;
//   - temperature, top_p, max_tokens (max_completion_tokens first) and
//     stop become Params.
func BuildTurn(req *Request, app *App) (*Turn, error) {
	t := &Turn{AppID: app.ID, Mode: app.Mode, User: strings.TrimSpace(req.User), ConversationID: req.ConversationID}
	if t.User == "" {
		t.User = DefaultUser
	}
	var err error
	if t.Params, err = req.params(); err != nil {
		return nil, err
	}

	last := -1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == roleUser {
			last = i
			break
		}
	}
	if last < 0 {
		return nil, paramError("messages", "messages must contain a user message; its text is the query")
	}
	for _, m := range req.Messages[last+1:] {
		if m.Role != roleSystem && m.Role != roleDeveloper {
			return nil, paramError("messages", "the last message must be the user's (after it only system messages may follow); found %q", m.Role)
		}
	}

	var instructions []string
	var history []HistoryTurn
	var pending []string // user text not answered yet
	for i, m := range req.Messages {
		text, files, err := m.content()
		if err != nil {
			return nil, err
		}
		switch m.Role {
		case roleSystem, roleDeveloper:
			if strings.TrimSpace(text) != "" {
				instructions = append(instructions, text)
			}
		case roleUser, roleTool, roleFunction:
			if i == last {
				t.Query, t.Files = text, files
				continue
			}
			if text != "" {
				pending = append(pending, text)
			}
		case roleAssistant:
			history = append(history, HistoryTurn{Query: strings.Join(pending, "\n\n"), Answer: text})
			pending = nil
		default:
			return nil, paramError("messages", "unknown message role %q", m.Role)
		}
	}
	if len(pending) > 0 {
		// Unanswered user messages before the query belong to it.
		t.Query = strings.Join(append(pending, t.Query), "\n\n")
	}
	t.Instructions = strings.Join(instructions, "\n\n")

	t.Inputs = map[string]any{}
	for k, v := range req.Inputs {
		t.Inputs[k] = v
	}
	switch app.Mode {
	case apps.ModeChat, apps.ModeAgentChat, apps.ModeAgent, apps.ModeAdvancedChat:
		if t.ConversationID == "" {
			t.History = history
		}
	case apps.ModeCompletion:
		if v := queryField(app.Form, true); v != "" {
			if _, given := t.Inputs[v]; !given {
				t.Inputs[v] = t.Query
			}
			t.Query = ""
		}
		t.ConversationID = ""
	case apps.ModeWorkflow:
		if v := queryField(app.Form, false); v != "" {
			if _, given := t.Inputs[v]; !given && t.Query != "" {
				t.Inputs[v] = t.Query
			}
		}
		t.Query, t.ConversationID = "", ""
	default:
		return nil, apperr.New(http.StatusBadRequest, apperr.CodeAppUnavailable, "App mode %q cannot answer chat completions.", app.Mode)
	}
	return t, nil
}

// queryField picks the form variable that receives the query: for
// completion apps one named `query`, then the first paragraph, then the
// first text input; for workflows the first text input or paragraph.
func queryField(form []apps.FormField, completion bool) string {
	if completion {
		for _, f := range form {
			if f.Variable == "query" && isText(f.Kind) {
				return f.Variable
			}
		}
		for _, f := range form {
			if f.Kind == apps.FieldParagraph {
				return f.Variable
			}
		}
	}
	for _, f := range form {
		if isText(f.Kind) {
			return f.Variable
		}
	}
	return ""
}

func isText(kind string) bool { return kind == apps.FieldTextInput || kind == apps.FieldParagraph }

// paramError is an invalid_param error about one request field.
func paramError(param, format string, args ...any) error {
	return &apperr.Error{Status: http.StatusBadRequest, Code: apperr.CodeInvalidParam,
		Message: fmt.Sprintf(format, args...), Err: paramName(param)}
}

// paramName carries the request field an error is about, for the
// `param` member of OpenAI errors.
type paramName string

func (p paramName) Error() string { return "param " + string(p) }

// HistoryFactor is how many times the per-message bound (--max-text) the
// text of all messages together may be.
const HistoryFactor = 10

// CheckText applies the text bound of the other operations (--max-text:
// max characters, 0 for none) to every message, and HistoryFactor times
// it to all of them together, so that a long history cannot carry what a
// single message may not.
func (r *Request) CheckText(max int) error {
	if max <= 0 {
		return nil
	}
	total := 0
	for i, m := range r.Messages {
		text, _, err := m.content()
		if err != nil {
			return err
		}
		n := len(text)
		if n > max {
			n = utf8.RuneCountInString(text)
		}
		if n > max {
			return paramError("messages", "messages[%d] is too long: at most %d characters are allowed per message", i, max)
		}
		total += n
		if total > HistoryFactor*max {
			return paramError("messages", "the messages are too long together: at most %d characters are allowed in all", HistoryFactor*max)
		}
	}
	return nil
}
