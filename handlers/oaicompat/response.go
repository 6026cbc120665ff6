package oaicompat

import (
	"errors"
	"net/http"

	"appkb/internal/platform/apperr"
)

// ChatCompletion is a blocking answer (`chat.completion`).
type ChatCompletion struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []Choice `json:"choices"`
	Usage             Usage    `json:"usage"`
	SystemFingerprint *string  `json:"system_fingerprint"`
	// ConversationID and Citations are appkb's extensions.
	ConversationID string `json:"conversation_id,omitempty"`
	Citations      []any  `json:"retriever_resources,omitempty"`
}

// Choice is the one choice of a blocking answer.
type Choice struct {
	Index        int            `json:"index"`
	Message      ChoiceMessage  `json:"message"`
	FinishReason string         `json:"finish_reason"`
	Logprobs     map[string]any `json:"logprobs"`
}

// ChoiceMessage is the assistant's message.
type ChoiceMessage struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

// Chunk is one event of a streamed answer (`chat.completion.chunk`).
type Chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *Usage        `json:"usage"`
	SystemFingerprint *string       `json:"system_fingerprint"`
	ConversationID    string        `json:"conversation_id,omitempty"`
	Citations         []any         `json:"retriever_resources,omitempty"`
}

// ChunkChoice is what a chunk changes of the one choice.
type ChunkChoice struct {
	Index        int            `json:"index"`
	Delta        Delta          `json:"delta"`
	FinishReason *string        `json:"finish_reason"`
	Logprobs     map[string]any `json:"logprobs"`
}

// Delta is a role or a piece of text.
type Delta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
}

const roleAssistantReply = "assistant"

// Completion builds the objects of one answer; every object repeats its
// id, model and creation time.
type Completion struct {
	ID      string
	Model   string
	Created int64
}

// NewCompletion names the answer that start began; model is the model
// the request named.
func NewCompletion(model string, start Start) Completion {
	return Completion{ID: "chatcmpl-" + start.MessageID, Model: model, Created: start.CreatedAt.Unix()}
}

// Blocking is the whole answer a.
func (c Completion) Blocking(a *Answer) ChatCompletion {
	return ChatCompletion{
		ID: c.ID, Object: "chat.completion", Created: c.Created, Model: c.Model,
		Choices: []Choice{{
			Message:      ChoiceMessage{Role: roleAssistantReply, Content: a.Text},
			FinishReason: finishReason(a),
		}},
		Usage:          a.Usage,
		ConversationID: a.ConversationID,
		Citations:      a.Citations,
	}
}

func (c Completion) chunk(choices ...ChunkChoice) Chunk {
	if choices == nil {
		choices = []ChunkChoice{}
	}
	return Chunk{ID: c.ID, Object: "chat.completion.chunk", Created: c.Created, Model: c.Model, Choices: choices}
}

// RoleChunk opens a stream: the role, no text.
func (c Completion) RoleChunk() Chunk {
	return c.chunk(ChunkChoice{Delta: Delta{Role: roleAssistantReply}})
}

// TextChunk carries the next piece of the answer.
func (c Completion) TextChunk(text string) Chunk {
	return c.chunk(ChunkChoice{Delta: Delta{Content: text}})
}

// FinishChunk closes the choice with its finish reason; it also carries
// the conversation and the citations.
func (c Completion) FinishChunk(a *Answer) Chunk {
	reason := finishReason(a)
	ch := c.chunk(ChunkChoice{FinishReason: &reason})
	ch.ConversationID, ch.Citations = a.ConversationID, a.Citations
	return ch
}

// UsageChunk is the last chunk when the client asked for usage: no
// choices, the token counts.
func (c Completion) UsageChunk(a *Answer) Chunk {
	u := a.Usage
	ch := c.chunk()
	ch.Usage = &u
	return ch
}

func finishReason(a *Answer) string {
	if a.FinishReason == "" {
		return FinishStop
	}
	return a.FinishReason
}

// Model is an app presented as a model.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Name    string `json:"name,omitempty"`
	Mode    string `json:"mode,omitempty"`
}

// ModelList is the list of models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// AsModel presents app as a model.
func AsModel(app *App) Model {
	return Model{ID: app.ID, Object: "model", Created: app.CreatedAt.Unix(), OwnedBy: OwnedBy, Name: app.Name, Mode: app.Mode}
}

// Models lists app as the only model.
func Models(app *App) ModelList {
	return ModelList{Object: "list", Data: []Model{AsModel(app)}}
}

// FindModel returns app as a model when name is its id or its name, and a
// 404 model_not_found error otherwise.
func FindModel(app *App, name string) (Model, error) {
	if name == app.ID || name == app.Name {
		return AsModel(app), nil
	}
	return Model{}, apperr.New(http.StatusNotFound, CodeModelNotFound,
		"The model %q does not exist or this key cannot use it; the key's app is %q (id %s).", name, app.Name, app.ID)
}

// Error codes this package adds.
const (
	CodeModelNotFound = "model_not_found"
	CodeInvalidAPIKey = "invalid_api_key"
)

// ErrorBody is an error in OpenAI's shape.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inner object of an error.
type ErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    *string `json:"code"`
	Param   *string `json:"param"`
}

// ToError renders err in OpenAI's shape and returns it with its HTTP
// status. The type follows the status as OpenAI assigns them; the code is
// appkb's own, except that a refused key reads invalid_api_key.
func ToError(err error) (int, ErrorBody) {
	e := apperr.From(err)
	code := e.Code
	typ := "invalid_request_error"
	switch {
	case e.Status == http.StatusUnauthorized:
		code = CodeInvalidAPIKey
		typ = "authentication_error"
	case e.Status == http.StatusForbidden:
		typ = "permission_error"
	case e.Status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case e.Status >= http.StatusInternalServerError:
		typ = "server_error"
	}
	body := ErrorBody{Error: ErrorDetail{Message: e.Message, Type: typ, Code: &code}}
	var p paramName
	if errors.As(err, &p) {
		s := string(p)
		body.Error.Param = &s
	}
	return e.Status, body
}
