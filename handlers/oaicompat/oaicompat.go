// Package oaicompat lets OpenAI clients use an appkb app as if it were a
// model. It reads a request in OpenAI's chat completions format, turns it
// into one turn of the key's app (see BuildTurn for the rules per app
// mode), and writes the app's answer back as a `chat.completion` object or
// as `chat.completion.chunk` events. It also renders apps as OpenAI models
// and errors in OpenAI's error shape.
//
// The package knows nothing about HTTP servers and does not run apps
// itself: a Runner does (handlers/openai implements one over flows, the
// runs the Dify operations start).
package oaicompat

import (
	"context"
	"strings"
	"time"

	"appkb/internal/apps"
)

// DefaultUser is the end user of requests that name none: OpenAI clients
// rarely send `user`, while every app turn belongs to an end user.
const DefaultUser = "openai-client"

// OwnedBy is the owner every app-as-model reports.
const OwnedBy = "appkb"

// App is what the mapping needs to know about the key's app.
type App struct {
	ID        string
	Name      string
	Mode      string
	CreatedAt time.Time
	// Form is the app's input form: the user_input_form of chat and
	// completion apps, the start node's variables of workflow apps.
	Form []apps.FormField
}

// Runner runs turns of apps. Implementations must stop the turn when ctx
// ends.
type Runner interface {
	// App describes the app with the given id.
	App(ctx context.Context, appID string) (*App, error)
	// Run runs one turn. With a nil emit the answer only comes back whole;
	// otherwise emit receives a Start event once the turn is prepared
	// (nothing has been sent to a model yet), then the answer's text as
	// it is produced. An error from emit ends the turn. An error returned
	// before Start was emitted means the turn never began.
	Run(ctx context.Context, t *Turn, emit func(Event) error) (*Answer, error)
}

// HistoryTurn is one earlier exchange that the client sent along.
type HistoryTurn struct {
	Query  string
	Answer string
}

// File is an image the last user message attached by URL.
type File struct {
	Type string // image
	URL  string
}

// Turn is one request, mapped onto the key's app.
type Turn struct {
	AppID string
	// Mode is the app's mode; it decides which of the fields below apply.
	Mode string
	// User names the end user.
	User string
	// Query is the question of chat-like apps (and of completion apps
	// without a suitable input).
	Query string
	// History is what came before the query, oldest first, for chat-like
	// apps when no ConversationID is given.
	History []HistoryTurn
	// Instructions are the request's system and developer messages, to
	// be added to the app's own instructions.
	Instructions string
	// Inputs are the values of the app's form.
	Inputs map[string]any
	// ConversationID continues a stored conversation of a chat-like app.
	ConversationID string
	// Files are images attached to the last user message.
	Files []File
	// Params replace the app's model parameters of the same names.
	Params map[string]any
}

// Event is one thing a Runner reports while a turn runs: its start, or
// the next piece of the answer.
type Event struct {
	// Start is set on the first event only.
	Start *Start
	// Text is the next piece of the answer.
	Text string
}

// Start describes a turn that began.
type Start struct {
	// MessageID is the stored message (or workflow run) behind the answer.
	MessageID      string
	ConversationID string
	CreatedAt      time.Time
}

// Finish reasons of an answer.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishContentFilter = "content_filter"
)

// Answer is a finished turn.
type Answer struct {
	Start
	// Text is the whole answer.
	Text string
	// FinishReason is one of the Finish constants.
	FinishReason string
	Usage        Usage
	// Citations are the knowledge chunks the answer cites, when the app
	// shows them.
	Citations []any
}

// Usage counts tokens the OpenAI way.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Serves reports whether path (below the API's base path, e.g.
// "/chat/completions") belongs to the OpenAI-compatible operations, whose
// errors take OpenAI's shape.
func Serves(path string) bool {
	return path == "/chat/completions" || path == "/models" || strings.HasPrefix(path, "/models/")
}
