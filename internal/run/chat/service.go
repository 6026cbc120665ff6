// Package chat is the runtime of the apps that answer without a workflow:
// chat apps (`chat`), agent apps (`agent-chat`, and the DSL 0.7 `agent`
// mode, which run the tool-calling loop of package agent) and text
// generators (`completion`). It validates a request against the app's definition,
// assembles the prompt, calls the model (blocking or streaming), applies the
// app's features (opening statement, keyword moderation, annotation reply,
// conversation names, suggested questions) and stores every conversation
// and message.
//
// Chatflow (`advanced-chat`) and `workflow` apps run on the workflow engine;
// for chatflows this package only keeps the conversation and message (see
// PrepareChatflow), and PrepareChat refuses them.
//
// The package knows nothing about HTTP. A handler calls PrepareChat or
// PrepareCompletion, whose errors are ordinary API errors, then
// Generation.Run, which in streaming mode hands typed Event values to a
// callback; their JSON encoding is exactly the payload of one
// Server-Sent Events frame.
package chat

import (
	"context"
	"log/slog"
	"sync"

	"gorm.io/gorm"

	"appkb/internal/apps"
	"appkb/internal/conversation/endusers"
	"appkb/internal/conversation/files"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cluster"
	"appkb/internal/platform/groupcommit"
	"appkb/internal/run/tools"
	"appkb/models"
)

// Models is where the runtime finds chat models; *llm.Registry is one.
type Models interface {
	Chat(provider, model string) (llm.ChatModel, error)
	// Backend names the backend serving a provider (llm.BackendBuiltin or
	// llm.BackendOpenAICompatible).
	Backend(provider string) (string, error)
}

// FileRef is a file a request attaches: an earlier upload (local_file) or
// a URL (remote_url).
type FileRef struct {
	Type           string // image, document, audio, video or custom
	TransferMethod string // local_file or remote_url
	URL            string
	UploadFileID   string
}

// ResolvedFile is an attached file after the files hook has checked it. Its
// JSON form is what a message stores in message_files (the contract's
// MessageFileItem).
type ResolvedFile struct {
	ID             string `json:"id"`
	Filename       string `json:"filename"`
	Type           string `json:"type"`
	URL            string `json:"url,omitempty"`
	MimeType       string `json:"mime_type,omitempty"`
	Size           int64  `json:"size"`
	TransferMethod string `json:"transfer_method"`
	// BelongsTo is "user" for files the end user attached.
	BelongsTo    string `json:"belongs_to"`
	UploadFileID string `json:"upload_file_id,omitempty"`
}

// Config holds the runtime's collaborators. DB is required; everything else
// has a default.
type Config struct {
	DB *gorm.DB
	// Models provides chat models; nil means the builtin model for every
	// provider.
	Models Models
	// Tasks is the registry of running generations; nil makes a new one.
	Tasks *Tasks
	// Commits batches the rows of concurrent answers with the other writes
	// that share it (workflow runs); nil makes a queue of the service's
	// own.
	Commits *groupcommit.Queue
	// ContextWindow gives a model's context size in tokens; nil uses
	// DefaultContextWindow.
	ContextWindow func(provider, model string) int
	// MatchAnnotation, when set, is asked before the model of a chat app:
	// a match answers the query with the stored annotation instead.
	MatchAnnotation func(ctx context.Context, appID, query string) (annotationID, answer string, ok bool, err error)
	// ResolveFiles, when set, checks and describes the files a request
	// attaches (endUserID is the stored end user's id). Without it,
	// attached files are ignored.
	ResolveFiles func(ctx context.Context, appID, endUserID string, files []FileRef) ([]ResolvedFile, error)
	// Retrieve, when set, searches the knowledge bases of an app's
	// dataset_configs for query. contexts are the texts the prompt gets and
	// resources the chunks the answer cites (position, ids, names, score…).
	// Without it, apps answer without knowledge.
	Retrieve func(ctx context.Context, appID string, mc *apps.ModelConfig, query string) (contexts []string, resources []models.RetrieverResource, err error)
	Logger   *slog.Logger
	// Tools finds the tools of agent apps; nil knows the built-in set only.
	Tools *tools.Registry
	// Files keeps the files tools make; without it a tool that makes one
	// fails.
	Files *files.Store
	// Replica is the process whose id the streamed messages carry; nil
	// leaves them without one (a process alone on its database).
	Replica *cluster.Replica
}

// Service runs chat and completion apps.
type Service struct {
	db    *gorm.DB
	apps  *apps.Store
	users *endusers.Store
	cfg   Config
	tasks *Tasks
	log   *slog.Logger

	// defs caches, by app id, the runtime configuration read from the
	// definition apps.Store.Load hands out; an entry is used only while the
	// store hands out the same parsed definition.
	defs sync.Map // string → *appConfig
	// missingTools remembers the agent tools that could not be loaded, by
	// app and tool, so that each is warned about once.
	missingTools sync.Map

	// writeMu orders this service's writes that do not go through
	// commits (a resumed chatflow's answer, conversation variables).
	writeMu sync.Mutex
	// commits batches the rows of concurrent answers (Config.Commits).
	commits *groupcommit.Queue
	// background counts work that outlives a request (conversation names).
	background sync.WaitGroup
	// replica owns the messages this service streams (Config.Replica).
	replica *cluster.Replica
}

// Wait blocks until the background work started so far (naming
// conversations with a model) has finished.
func (s *Service) Wait() { s.background.Wait() }

// New builds a Service.
func New(cfg Config) *Service {
	if cfg.Models == nil {
		var builtinOnly *llm.Registry // a nil registry serves everything with the builtin model
		cfg.Models = builtinOnly
	}
	if cfg.Tasks == nil {
		cfg.Tasks = NewTasks()
	}
	if cfg.ContextWindow == nil {
		cfg.ContextWindow = func(_, model string) int { return DefaultContextWindow(model) }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Commits == nil {
		cfg.Commits = groupcommit.New(cfg.DB)
	}
	return &Service{
		commits: cfg.Commits,
		db:      cfg.DB,
		apps:    apps.NewStore(cfg.DB),
		users:   endusers.NewStore(cfg.DB),
		cfg:     cfg,
		tasks:   cfg.Tasks,
		log:     cfg.Logger,
		replica: cfg.Replica,
	}
}

// Tasks returns the registry of running generations.
func (s *Service) Tasks() *Tasks { return s.tasks }

// Request is one call to send a chat message or generate a completion.
type Request struct {
	AppID string
	// App, when set, is the row of AppID as the caller already loaded it
	// (apps.Store.Cached); it is used instead of looking the app up again.
	App *models.App
	// User is the caller's end-user string.
	User   string
	Query  string
	Inputs map[string]any
	// ConversationID continues a conversation (chat apps only); empty
	// starts a new one.
	ConversationID string
	Files          []FileRef
	// AutoGenerateName names a new conversation after its first query.
	AutoGenerateName bool
	// Streaming selects Server-Sent Events over one JSON answer.
	Streaming bool
	// History, for a request that names no conversation, is the
	// conversation so far as the caller keeps it, oldest first (stateless
	// callers such as the OpenAI-compatible endpoint). It is sent to the
	// model like stored history but not stored itself.
	History []Turn
	// Instructions are added to the app's system prompt.
	Instructions string
	// Params replace the app's model parameters of the same names
	// (temperature, top_p, max_tokens, stop…).
	Params map[string]any
}

// Statuses of a stored message.
const (
	StatusNormal = "normal"
	StatusError  = "error"
)

// DefaultConversationName is the name of a conversation that has not been
// named.
const DefaultConversationName = "New conversation"

// maxHistoryMessages bounds how many earlier messages are read to build the
// history; the context window usually admits far fewer.
const maxHistoryMessages = 200

// appConfig is what the runtime reads from an app definition.
type appConfig struct {
	def      *apps.Definition // the store's parsed definition it was read from
	mode     string
	mc       *apps.ModelConfig
	features apps.Features
	form     []apps.FormField
	filter   *keywordFilter
}

// loadApp returns the app's runtime configuration. The store parses a
// definition once per cached row; the configuration read from it is kept
// here for as long as the store hands out that same parsed definition.
func (s *Service) loadApp(ctx context.Context, appID string, loaded *models.App) (*models.App, *appConfig, error) {
	var app *models.App
	var def *apps.Definition
	var err error
	if loaded != nil && loaded.ID == appID {
		app = loaded
		def, err = s.apps.DefinitionOf(app)
	} else {
		app, def, err = s.apps.Load(ctx, appID)
	}
	if err != nil {
		return nil, nil, err
	}
	if v, ok := s.defs.Load(appID); ok {
		if ac := v.(*appConfig); ac.def == def {
			return app, ac, nil
		}
	}
	ac := &appConfig{
		def:      def,
		mode:     def.App.Mode,
		mc:       modelConfigOf(def),
		features: def.FeatureSwitches(),
		form:     def.InputForm(),
	}
	ac.filter = newKeywordFilter(ac.features.SensitiveWordAvoidance)
	s.defs.Store(appID, ac)
	return app, ac, nil
}

// modelConfigOf returns the model configuration of an app. Agent apps of
// DSL 0.7 keep theirs in the agent block (model and instructions), which
// is read into the same shape.
func modelConfigOf(def *apps.Definition) *apps.ModelConfig {
	if def.ModelConfig != nil {
		return def.ModelConfig
	}
	if def.App.Mode != apps.ModeAgent || def.Agent == nil {
		return nil
	}
	mc := &apps.ModelConfig{PromptType: "simple"}
	if m, ok := def.Agent["model"].(map[string]any); ok {
		mc.Model.Provider, _ = m["provider"].(string)
		mc.Model.Name, _ = m["name"].(string)
		mc.Model.Mode, _ = m["mode"].(string)
		mc.Model.CompletionParams, _ = m["completion_params"].(map[string]any)
	}
	for _, key := range []string{"instructions", "instruction", "prompt", "pre_prompt"} {
		if s, ok := def.Agent[key].(string); ok && s != "" {
			mc.PrePrompt = s
			break
		}
	}
	mc.Features = def.FeatureSwitches()
	mc.UserInputForm = def.InputForm()
	return mc
}

// isAgentMode reports the modes whose answers are agent messages.
func isAgentMode(mode string) bool { return mode == apps.ModeAgentChat || mode == apps.ModeAgent }

// checkChatApp refuses apps the chat operations cannot serve.
func checkChatApp(mode string) error {
	switch mode {
	case apps.ModeChat, apps.ModeAgentChat, apps.ModeAgent:
		return nil
	case apps.ModeAdvancedChat:
		return apperr.Fail(apperr.CodeAppUnavailable,
			"Chatflow (advanced-chat) apps answer through their workflow graph, not through PrepareChat.")
	}
	return apperr.Fail(apperr.CodeNotChatApp, "App mode %s does not hold conversations; this operation is for chat apps.", mode)
}

// checkCompletionApp refuses apps the completion operations cannot serve.
func checkCompletionApp(mode string) error {
	if mode != apps.ModeCompletion {
		return apperr.Fail(apperr.CodeAppUnavailable, "App mode %s is not a text generator; this operation is for completion apps.", mode)
	}
	return nil
}
