package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"appkb/internal/apps"
	"appkb/internal/conversation/conversations"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// A chatflow (advanced-chat app) answers with its workflow graph, which
// this package does not run. What it shares with chat apps is the
// bookkeeping around the answer: the conversation (created, continued,
// named, counted), the stored message and the task that a stop request
// reaches. ChatflowTurn carries that bookkeeping for one turn; the caller
// runs the graph in between PrepareChatflow and Finish.

// ChatflowTurn is one prepared turn of a chatflow conversation.
type ChatflowTurn struct {
	TaskID         string
	MessageID      string
	ConversationID string
	CreatedAt      time.Time
	Streaming      bool
	// EndUserID is the stored end user behind the request's user string.
	EndUserID string
	// Inputs are the values for the start node: the request's for a new
	// conversation, the stored ones (which win, as in Dify) otherwise.
	Inputs map[string]any
	// History is the conversation so far, oldest first, as alternating
	// user and assistant messages.
	History []llm.Message
	// DialogueCount numbers this turn within its conversation (1 for the
	// first), the value of sys.dialogue_count.
	DialogueCount int
	// ConversationVariables are the values kept from earlier turns; nil
	// for a new conversation, whose variables start at the declared values.
	ConversationVariables map[string]any
	// Files are the files the request attached, checked against the app's
	// upload settings; the message keeps them and the run sees them as
	// sys.files.
	Files []ResolvedFile

	g   *Generation
	def *apps.Definition
}

// PrepareChatflow readies a turn of a chatflow whose graph def describes
// (the app's current definition or a pinned version of it). It resolves
// the end user, and for a conversation_id loads the caller's conversation
// (not_found when it is unknown or another user's), its inputs, history,
// turn count and conversation variables. Nothing is stored yet.
func (s *Service) PrepareChatflow(ctx context.Context, req Request, def *apps.Definition) (*ChatflowTurn, error) {
	if def == nil || def.Workflow == nil {
		return nil, apperr.Fail(apperr.CodeAppUnavailable, "The chatflow has no workflow graph.")
	}
	g, err := s.newGeneration(ctx, req, apps.ModeAdvancedChat, true)
	if err != nil {
		return nil, err
	}
	t := &ChatflowTurn{g: g, def: def, DialogueCount: 1}
	if req.ConversationID == "" {
		g.newConv = true
		g.ConversationID = models.NewID()
		g.inputs = req.Inputs
		if g.inputs == nil {
			g.inputs = map[string]any{}
		}
		g.intro = RenderTemplate(def.FeatureSwitches().OpeningStatement, textVars(g.inputs))
		for _, tr := range req.History {
			t.History = append(t.History,
				llm.Message{Role: llm.RoleUser, Content: tr.Query},
				llm.Message{Role: llm.RoleAssistant, Content: tr.Answer})
		}
	} else {
		turns, err := g.continueConversation(ctx, req.ConversationID, def.InputForm())
		if err != nil {
			return nil, err
		}
		for _, tr := range turns {
			t.History = append(t.History,
				llm.Message{Role: llm.RoleUser, Content: tr.Query},
				llm.Message{Role: llm.RoleAssistant, Content: tr.Answer})
		}
		var count int
		if err := s.db.WithContext(ctx).Model(&models.Conversation{}).Where("id = ?", g.ConversationID).
			Select("dialogue_count").Scan(&count).Error; err != nil {
			return nil, err
		}
		t.DialogueCount = count + 1
		if t.ConversationVariables, err = s.loadConversationVariables(ctx, g.ConversationID, def); err != nil {
			return nil, err
		}
	}
	if len(req.Files) > 0 && s.cfg.ResolveFiles != nil {
		if g.files, err = s.cfg.ResolveFiles(ctx, req.AppID, g.endUserID, req.Files); err != nil {
			return nil, err
		}
	}
	t.Files = g.files
	t.TaskID, t.MessageID, t.ConversationID = g.TaskID, g.MessageID, g.ConversationID
	t.CreatedAt, t.Streaming, t.EndUserID, t.Inputs = g.CreatedAt, g.Streaming, g.endUserID, g.inputs
	return t, nil
}

// loadConversationVariables seeds the declared variables the conversation
// lacks and returns every stored value by name.
func (s *Service) loadConversationVariables(ctx context.Context, conversationID string, def *apps.Definition) (map[string]any, error) {
	if err := conversations.NewStore(s.db).SeedVariables(ctx, conversationID, def); err != nil {
		return nil, err
	}
	var rows []models.ConversationVariable
	if err := s.db.WithContext(ctx).Where("conversation_id = ?", conversationID).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]any, len(rows))
	for _, r := range rows {
		var v any
		if err := json.Unmarshal([]byte(r.Value), &v); err != nil {
			continue // an unreadable value falls back to the declared one
		}
		out[r.Name] = v
	}
	return out, nil
}

// ChatflowOutcome is what the graph run of a turn produced.
type ChatflowOutcome struct {
	Answer        string
	TotalTokens   int
	Elapsed       time.Duration
	WorkflowRunID string
	// Err is the failure of the run; the message is stored with status
	// "error" and this text.
	Err error
	// ConversationVariables are the values to keep for the next turn.
	ConversationVariables map[string]any
}

// Finish stores the turn: the conversation (created and named when new,
// its turn count raised otherwise), the message with its answer, tokens,
// latency, status and run id, and the conversation variables. It returns
// the metadata of message_end and of the blocking answer. It stores with
// a context that outlives ctx, so a client that went away loses nothing.
func (t *ChatflowTurn) Finish(ctx context.Context, out ChatflowOutcome) (Metadata, error) {
	g := t.g
	storeCtx := context.WithoutCancel(ctx)
	usage := wireUsage(llm.Usage{TotalTokens: out.TotalTokens}, out.Elapsed)
	status, errText := StatusNormal, (*string)(nil)
	if out.Err != nil {
		status = StatusError
		msg := apperr.From(out.Err).Message
		errText = &msg
	}
	rec := g.record(out.Answer, status, errText, usage, nil)
	if out.WorkflowRunID != "" {
		id := out.WorkflowRunID
		rec.WorkflowRunID = &id
	}
	name := DefaultConversationName
	if g.newConv && g.autoName {
		name = FirstWords(g.query)
	}
	if err := g.save(storeCtx, rec, name, false); err != nil {
		return Metadata{}, apperr.Internal(err)
	}
	if err := g.svc.saveConversationVariables(storeCtx, g.ConversationID, t.def, out.ConversationVariables); err != nil {
		return Metadata{}, apperr.Internal(err)
	}
	return Metadata{Usage: usage, RetrieverResources: []RetrieverResource{}}, nil
}

// saveConversationVariables writes the values a run ended with into the
// conversation's rows, seeding the declared ones first.
func (s *Service) saveConversationVariables(ctx context.Context, conversationID string, def *apps.Definition, values map[string]any) error {
	if len(values) == 0 {
		return nil
	}
	if err := conversations.NewStore(s.db).SeedVariables(ctx, conversationID, def); err != nil {
		return err
	}
	now := time.Now().UTC()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	for name, v := range values {
		text, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("conversation variable %q: %w", name, err)
		}
		err = s.db.WithContext(ctx).Model(&models.ConversationVariable{}).
			Where("conversation_id = ? AND name = ?", conversationID, name).
			Updates(map[string]any{"value": string(text), "updated_at": now}).Error
		if err != nil {
			return fmt.Errorf("store conversation variable %q: %w", name, err)
		}
	}
	return nil
}

// MessageEvent is the message event carrying text, a piece of the answer.
func (t *ChatflowTurn) MessageEvent(text string) Event { return t.g.messageEvent(text) }

// MessageEndEvent closes a successful stream.
func (t *ChatflowTurn) MessageEndEvent(md Metadata) Event {
	return MessageEndEvent{Event: EventMessageEnd, ID: t.MessageID, StreamBase: t.g.base(), Metadata: md}
}

// ErrorEvent reports err in a stream that has begun.
func (t *ChatflowTurn) ErrorEvent(err error) Event { return t.g.ErrorEvent(err) }

// BlockingResponse is the JSON answer of a blocking turn.
func (t *ChatflowTurn) BlockingResponse(answer string, md Metadata) BlockingResponse {
	return t.g.BlockingResponse(&Result{Answer: answer, Metadata: md})
}

// FinishResumed stores what a chatflow run that paused for human input
// produced once it went on: the turn's message gets the whole answer, the
// run's tokens and its status, and the conversation keeps the variables
// the run ended with. The message was stored when the run paused. It
// returns the event that closes the resumed stream: message_end, or error
// when the run failed.
func (s *Service) FinishResumed(ctx context.Context, def *apps.Definition, taskID, conversationID, messageID string, out ChatflowOutcome) (Event, error) {
	status, errText := StatusNormal, (*string)(nil)
	if out.Err != nil {
		status = StatusError
		msg := apperr.From(out.Err).Message
		errText = &msg
	}
	s.writeMu.Lock()
	err := s.db.WithContext(ctx).Model(&models.Message{}).Where("id = ?", messageID).Updates(map[string]any{
		"answer": out.Answer, "total_tokens": out.TotalTokens, "status": status, "error": errText,
		"updated_at": time.Now().UTC(),
	}).Error
	s.writeMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("store resumed answer: %w", err)
	}
	if err := s.saveConversationVariables(ctx, conversationID, def, out.ConversationVariables); err != nil {
		return nil, err
	}
	g := &Generation{TaskID: taskID, MessageID: messageID, ConversationID: conversationID, CreatedAt: time.Now().UTC(), chatOp: true}
	if out.Err != nil {
		return g.ErrorEvent(out.Err), nil
	}
	md := Metadata{Usage: wireUsage(llm.Usage{TotalTokens: out.TotalTokens}, out.Elapsed), RetrieverResources: []RetrieverResource{}}
	return MessageEndEvent{Event: EventMessageEnd, ID: messageID, StreamBase: g.base(), Metadata: md}, nil
}
