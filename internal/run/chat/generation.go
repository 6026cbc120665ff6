package chat

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"appkb/internal/apps"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// Generation is a prepared answer: everything has been checked and the
// prompt is assembled; Run produces it.
type Generation struct {
	TaskID    string
	MessageID string
	// ConversationID is empty for completion apps.
	ConversationID string
	// Mode is the app's mode, reported in blocking answers.
	Mode      string
	CreatedAt time.Time
	Streaming bool

	svc        *Service
	appID      string
	user       string
	endUserID  string
	chatOp     bool
	newConv    bool
	convInputs map[string]any
	intro      string
	parentID   *string
	query      string
	inputs     map[string]any
	files      []ResolvedFile
	autoName   bool
	builtin    bool
	model      llm.ChatModel
	params     map[string]any
	prompt     Prompt
	filter     *keywordFilter
	direct     string // the preset reply when input moderation hit
	directHit  bool
	// knowledge and resources are what retrieval found for the query.
	knowledge   []string
	resources   []RetrieverResource
	showSources bool
	// agentMode is the tool loop of agent apps.
	agentMode apps.AgentMode
}

// newGeneration starts the generation of one answer to req in an app of
// the given mode, for the end user req names (created on first use); chatOp
// tells whether the answer belongs to a conversation.
func (s *Service) newGeneration(ctx context.Context, req Request, mode string, chatOp bool) (*Generation, error) {
	user, err := s.users.Resolve(ctx, req.AppID, req.User)
	if err != nil {
		return nil, err
	}
	return &Generation{
		TaskID:    uuid.NewString(),
		MessageID: models.NewID(),
		Mode:      mode,
		CreatedAt: time.Now().UTC(),
		Streaming: req.Streaming,
		svc:       s,
		appID:     req.AppID,
		user:      req.User,
		endUserID: user.ID,
		chatOp:    chatOp,
		query:     req.Query,
		autoName:  req.AutoGenerateName,
	}, nil
}

// PrepareChat checks a chat-message request and readies its generation.
// It fails with not_chat_app for apps that hold no conversations,
// bad_request for a blocking request to an agent app, invalid_param for
// bad inputs, not_found for a conversation that does not exist or belongs
// to another user, and the model layer's codes when the app's model cannot
// be used.
func (s *Service) PrepareChat(ctx context.Context, req Request) (*Generation, error) {
	return s.prepare(ctx, req, true)
}

// PrepareCompletion checks a completion request and readies its
// generation. Apps other than text generators give app_unavailable.
func (s *Service) PrepareCompletion(ctx context.Context, req Request) (*Generation, error) {
	req.ConversationID = ""
	return s.prepare(ctx, req, false)
}

func (s *Service) prepare(ctx context.Context, req Request, chatOp bool) (*Generation, error) {
	_, ac, err := s.loadApp(ctx, req.AppID, req.App)
	if err != nil {
		return nil, err
	}
	if chatOp {
		err = checkChatApp(ac.mode)
	} else {
		err = checkCompletionApp(ac.mode)
	}
	if err != nil {
		return nil, err
	}
	if ac.mc == nil {
		return nil, apperr.Fail(apperr.CodeAppUnavailable, "The app has no model configuration.")
	}
	if isAgentMode(ac.mode) && !req.Streaming {
		return nil, apperr.Fail(apperr.CodeBadRequest, "Agent apps only answer in streaming mode; send response_mode \"streaming\".")
	}
	g, err := s.newGeneration(ctx, req, ac.mode, chatOp)
	if err != nil {
		return nil, err
	}
	g.filter, g.agentMode = ac.filter, agentModeOf(ac.mc)

	var history []Turn
	if chatOp && req.ConversationID != "" {
		history, err = g.continueConversation(ctx, req.ConversationID, ac.form)
	} else {
		history = req.History
		g.inputs, err = ValidateInputs(ac.form, req.Inputs)
		if chatOp {
			g.newConv = true
			g.ConversationID = models.NewID()
			g.intro = RenderTemplate(ac.features.OpeningStatement, textVars(g.inputs))
		}
	}
	if err != nil {
		return nil, err
	}

	spec := ac.mc.Model
	if g.model, err = s.cfg.Models.Chat(spec.Provider, spec.Name); err != nil {
		return nil, err
	}
	backend, _ := s.cfg.Models.Backend(spec.Provider)
	g.builtin = backend == llm.BackendBuiltin
	g.params = overrideParams(spec.CompletionParams, req.Params)

	if len(req.Files) > 0 && s.cfg.ResolveFiles != nil {
		if g.files, err = s.cfg.ResolveFiles(ctx, req.AppID, g.endUserID, req.Files); err != nil {
			return nil, err
		}
	}

	g.direct, g.directHit = ac.filter.checkInputs(req.Query, g.inputs)

	// Knowledge from the app's dataset_configs fills the prompt's context
	// (remote models read it there, the builtin model from Knowledge).
	if err := g.retrieve(ctx, ac.mc); err != nil {
		return nil, err
	}
	window := s.cfg.ContextWindow(spec.Provider, spec.Name)
	g.prompt = BuildPrompt(PromptParams{
		AppMode:       ac.mode,
		Config:        ac.mc,
		Inputs:        g.inputs,
		Query:         req.Query,
		Context:       strings.Join(g.knowledge, "\n"),
		History:       history,
		ContextWindow: window,
		ReserveTokens: answerReserve(g.params, window),
	})
	g.prompt.Messages = withInstructions(g.prompt.Messages, req.Instructions)
	return g, nil
}

// overrideParams is the app's model parameters with those of override
// put in their place; the app's map is left as it is.
func overrideParams(app, override map[string]any) map[string]any {
	if len(override) == 0 {
		return app
	}
	out := make(map[string]any, len(app)+len(override))
	for k, v := range app {
		out[k] = v
	}
	for k, v := range override {
		out[k] = v
	}
	return out
}

// withInstructions adds a caller's instructions to a prompt: after the
// app's own system message, or as a system message of their own before
// everything else.
func withInstructions(msgs []llm.Message, instructions string) []llm.Message {
	if strings.TrimSpace(instructions) == "" {
		return msgs
	}
	if len(msgs) > 0 && msgs[0].Role == llm.RoleSystem {
		out := append([]llm.Message{}, msgs...)
		out[0].Content = strings.TrimRight(out[0].Content, "\n") + "\n\n" + instructions
		return out
	}
	return append([]llm.Message{{Role: llm.RoleSystem, Content: instructions}}, msgs...)
}

// continueConversation loads the caller's conversation, its inputs (which,
// as in Dify, take the place of the request's) and its history.
func (g *Generation) continueConversation(ctx context.Context, id string, form []apps.FormField) ([]Turn, error) {
	db := g.svc.db.WithContext(ctx)
	var conv models.Conversation
	err := db.Where("id = ? AND app_id = ? AND end_user_id = ?", id, g.appID, g.endUserID).Take(&conv).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.NotFound("Conversation Not Exists.")
	}
	if err != nil {
		return nil, err
	}
	if conv.Status != "" && conv.Status != StatusNormal {
		return nil, apperr.Fail(apperr.CodeConversationCompleted, "The conversation has ended.")
	}
	g.ConversationID = conv.ID
	stored := map[string]any{}
	if conv.Inputs != "" {
		if err := json.Unmarshal([]byte(conv.Inputs), &stored); err != nil {
			stored = map[string]any{}
		}
	}
	g.inputs = stored
	for _, f := range form {
		if _, ok := g.inputs[f.Variable]; !ok && f.Variable != "" {
			g.inputs[f.Variable] = fieldDefault(f)
		}
	}

	var rows []struct{ ID, Query, Answer string }
	err = db.Model(&models.Message{}).Select("id, query, answer").
		Where("conversation_id = ?", conv.ID).
		Order("created_at DESC, id DESC").Limit(maxHistoryMessages).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 {
		parent := rows[0].ID
		g.parentID = &parent
	}
	history := make([]Turn, 0, len(rows))
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Answer != "" {
			history = append(history, Turn{Query: rows[i].Query, Answer: rows[i].Answer})
		}
	}
	return history, nil
}

// textVars renders inputs as template values.
func textVars(inputs map[string]any) map[string]string {
	out := make(map[string]string, len(inputs))
	for k, v := range inputs {
		out[k] = formatValue(v)
	}
	return out
}

// answerReserve is how many tokens of the context window are kept for the
// answer: the app's max_tokens when it sets one, else an eighth of the
// window (at most 2048).
func answerReserve(params map[string]any, window int) int {
	if n, ok := toNumber(params["max_tokens"]); ok && n > 0 {
		return int(n)
	}
	return min(window/8, 2048)
}

// Result is a finished answer.
type Result struct {
	Answer   string
	Metadata Metadata
	// Stopped is set when a stop request ended the answer early; Answer
	// then holds what was generated until then.
	Stopped bool
	// FinishReason is why the model ended the answer as it reported it
	// ("stop", "length"…), or empty when no model call ended it.
	FinishReason string
}

// BlockingResponse is the JSON answer of a blocking call for res.
func (g *Generation) BlockingResponse(res *Result) BlockingResponse {
	return BlockingResponse{
		Event:          EventMessage,
		TaskID:         g.TaskID,
		ID:             g.MessageID,
		MessageID:      g.MessageID,
		ConversationID: g.ConversationID,
		Mode:           g.Mode,
		Answer:         res.Answer,
		Metadata:       res.Metadata,
		CreatedAt:      g.CreatedAt.Unix(),
	}
}

// ErrorEvent is the stream event that reports err.
func (g *Generation) ErrorEvent(err error) ErrorEvent {
	e := apperr.From(err)
	if errors.Is(err, context.Canceled) && e.Code == apperr.CodeInternal {
		e = apperr.Fail(apperr.CodeCompletionRequestError, "The request was cancelled.")
	}
	return ErrorEvent{
		Event:          EventError,
		MessageID:      g.MessageID,
		ConversationID: g.ConversationID,
		CreatedAt:      g.CreatedAt.Unix(),
		Status:         e.Status,
		Code:           e.Code,
		Message:        e.Message,
	}
}

func (g *Generation) base() StreamBase {
	return StreamBase{TaskID: g.TaskID, MessageID: g.MessageID, ConversationID: g.ConversationID, CreatedAt: g.CreatedAt.Unix()}
}

func (g *Generation) messageEvent(delta string) MessageEvent {
	name := EventMessage
	if isAgentMode(g.Mode) {
		name = EventAgentMessage
	}
	return MessageEvent{Event: name, ID: g.MessageID, StreamBase: g.base(), Answer: delta}
}

// errWithheld stops a streaming model call when output moderation hits.
var errWithheld = errors.New("answer withheld by output moderation")

// outcome collects what a run produced.
type outcome struct {
	answer     string
	usage      Usage
	annotation *AnnotationReply
	stopped    bool
	finish     string // the model's finish reason
	err        error  // the failure, if the run failed
	// thoughts are the steps of an agent answer.
	thoughts []*thought
}

// Run produces the answer. With a nil emit the call is blocking: the answer
// comes back whole. Otherwise every event is handed to emit as soon as it
// exists, ending with message_end; an error from emit (the client went
// away) cancels the model call.
//
// The model call is cancelled when ctx ends and when a stop request names
// the task. A stop is not a failure: the partial answer is stored and, in
// streaming mode, message_end is sent. Every other failure is stored on
// the message (status "error") and returned; in streaming mode the caller
// reports it with ErrorEvent. The message and its conversation are stored
// with a context that outlives ctx, so a disconnect does not lose them.
func (g *Generation) Run(ctx context.Context, emit func(Event) error) (res *Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = g.recovered(v)
			res = nil
		}
	}()
	return g.run(ctx, emit)
}

func (g *Generation) run(ctx context.Context, emit func(Event) error) (*Result, error) {
	streaming := emit != nil
	if !streaming {
		emit = func(Event) error { return nil }
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	g.svc.tasks.add(g.TaskID, &task{appID: g.appID, user: g.user, stop: stop})
	defer g.svc.tasks.remove(g.TaskID)

	storeCtx := context.WithoutCancel(ctx)
	inserted := false
	if streaming {
		// Store the message at once, so that the conversation the first
		// event names exists while the answer is being written.
		if err := g.insert(storeCtx, g.startRecord(), DefaultConversationName); err != nil {
			return nil, err
		}
		inserted = true
	}
	name, later := g.startNaming(ctx)

	var out outcome
	switch {
	case g.directHit:
		out.answer = g.direct
		out.usage = wireUsage(llm.Usage{}, 0)
		out.err = emit(g.messageEvent(out.answer))
	default:
		if answered := g.tryAnnotation(runCtx, emit, &out); !answered {
			g.callModel(runCtx, streaming, emit, &out)
		}
	}
	if out.err != nil && !out.stopped && ctx.Err() != nil {
		out.err = apperr.FailWith(ctx.Err(), apperr.CodeCompletionRequestError,
			"interrupted: the client went away before the answer was complete")
	}

	rec := g.finalRecord(&out)
	if later != nil {
		select {
		case n := <-later: // the title is already there: store it with the answer
			name, later = n, nil
		default:
		}
	}
	if err := g.save(storeCtx, rec, name, inserted); err != nil {
		g.svc.log.Error("chat: storing message failed", "message_id", g.MessageID, "error", err)
		if out.err == nil {
			out.err = apperr.Internal(err)
		}
	}
	if later != nil {
		g.renameLater(storeCtx, later)
	}
	if out.err != nil {
		return nil, out.err
	}

	res := &Result{
		Answer:       out.answer,
		Stopped:      out.stopped,
		FinishReason: out.finish,
		Metadata:     Metadata{Usage: out.usage, RetrieverResources: g.citations(&out), AnnotationReply: out.annotation},
	}
	if isAgentMode(g.Mode) && out.thoughts == nil {
		if err := emit(g.thoughtEvent(out.answer)); err != nil {
			return nil, err
		}
	}
	if err := emit(MessageEndEvent{Event: EventMessageEnd, ID: g.MessageID, StreamBase: g.base(), Metadata: res.Metadata}); err != nil {
		return nil, err
	}
	return res, nil
}

// tryAnnotation answers from a stored annotation when the hook finds one.
func (g *Generation) tryAnnotation(ctx context.Context, emit func(Event) error, out *outcome) bool {
	match := g.svc.cfg.MatchAnnotation
	if match == nil || !g.chatOp {
		return false
	}
	id, answer, ok, err := match(ctx, g.appID, g.query)
	if err != nil {
		out.err = err
		return true
	}
	if !ok {
		return false
	}
	out.answer = answer
	out.annotation = &AnnotationReply{ID: id}
	g.resources = nil // the annotation, not the knowledge, answered
	out.usage = wireUsage(llm.Usage{}, 0)
	out.err = emit(g.messageEvent(answer))
	return true
}

// callModel asks the app's model and fills out.
func (g *Generation) callModel(ctx context.Context, streaming bool, emit func(Event) error, out *outcome) {
	if isAgentMode(g.Mode) {
		g.runAgent(ctx, emit, out)
		return
	}
	req := llm.ChatRequest{Messages: g.prompt.Messages, Params: g.params, Knowledge: g.knowledge}
	var buf strings.Builder
	withheld := ""
	start := time.Now()
	var resp *llm.ChatResponse
	var err error
	if streaming {
		lastKept := time.Now()
		resp, err = g.model.Stream(ctx, req, func(ch llm.Chunk) error {
			if ch.Delta == "" {
				return nil
			}
			buf.WriteString(ch.Delta)
			if preset, hit := g.filter.checkOutput(buf.String()); hit {
				withheld = preset
				return errWithheld
			}
			if err := emit(g.messageEvent(ch.Delta)); err != nil {
				return err
			}
			if time.Since(lastKept) >= partialEvery {
				lastKept = time.Now()
				g.keepPartial(context.WithoutCancel(ctx), buf.String())
			}
			return nil
		})
	} else {
		resp, err = g.model.Chat(ctx, req)
		if err == nil {
			buf.WriteString(resp.Content)
			if preset, hit := g.filter.checkOutput(resp.Content); hit {
				withheld = preset
			}
		}
	}
	latency := time.Since(start)

	if resp != nil {
		if resp.Usage.Latency > 0 {
			latency = resp.Usage.Latency
		}
		out.usage = wireUsage(resp.Usage, latency)
		out.finish = resp.FinishReason
	} else {
		// The call did not finish, so no usage was reported; count what
		// was sent and what came back.
		out.usage = wireUsage(llm.Usage{
			PromptTokens:     llm.CountMessages(req.Messages),
			CompletionTokens: llm.CountTokens(buf.String()),
		}, latency)
	}
	out.answer = buf.String()

	g.settle(ctx, out, withheld, streaming, emit, err)
}

// settle records how a model call ended in out: an answer the output
// moderation withheld is replaced by its preset (announced to a stream by
// a message_replace event), a call cut off by a stop marks out stopped,
// and any other error of the call is out's error.
func (g *Generation) settle(ctx context.Context, out *outcome, withheld string, streaming bool, emit func(Event) error, err error) {
	switch {
	case withheld != "":
		out.answer = withheld
		if streaming {
			out.err = emit(MessageReplaceEvent{Event: EventMessageReplace, StreamBase: g.base(), Answer: withheld, Reason: "output_moderation"})
		}
	case err == nil:
	case errors.Is(context.Cause(ctx), ErrStopped):
		out.stopped = true
	default:
		out.err = err
	}
}

// partialEvery is how often the text of an answer being streamed is
// written to its message, so that a server that stops mid-stream leaves
// what it had already sent (CloseInterrupted keeps it).
const partialEvery = time.Second

// keepPartial writes the answer streamed so far to the message while it is
// still being written; a failure only costs that copy, so it is logged.
func (g *Generation) keepPartial(ctx context.Context, answer string) {
	err := g.svc.commits.Write(ctx, func(tx *gorm.DB) error {
		return tx.Model(&models.Message{}).Where("id = ? AND generating = ?", g.MessageID, true).
			Update("answer", answer).Error
	})
	if err != nil {
		g.svc.log.Warn("chat: keeping the partial answer failed", "message_id", g.MessageID, "error", err)
	}
}

// thoughtEvent reports the single step of an agent answer that used no
// tools.
func (g *Generation) thoughtEvent(text string) AgentThoughtEvent {
	return g.stepEvent(&thought{ID: g.thoughtID(), Position: 1, Thought: text, Files: []string{}})
}

// thoughtID derives the id of the agent step from the message id, so that
// both events of the step and the stored record agree.
func (g *Generation) thoughtID() string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("agent-thought:"+g.MessageID)).String()
}
