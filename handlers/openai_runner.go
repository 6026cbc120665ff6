package handlers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"appkb/apperr"
	"appkb/apps"
	"appkb/chat"
	"appkb/llm"
	"appkb/oaicompat"
	"appkb/workflow"
	"appkb/workflowruns"
)

// openaiRunner runs the turns of the OpenAI-compatible endpoint over the
// chat runtime (chat, agent and completion apps) and the workflow engine
// (chatflow and workflow apps), the same code the Dify operations use.
// It is the only place where oaicompat meets the runtimes.
type openaiRunner struct{ s *Server }

var _ oaicompat.Runner = openaiRunner{}

// App describes the key's app with its input form.
func (r openaiRunner) App(ctx context.Context, appID string) (*oaicompat.App, error) {
	app, err := r.s.apps.Get(ctx, appID)
	if err != nil {
		return nil, err
	}
	out := &oaicompat.App{ID: app.ID, Name: app.Name, Mode: app.Mode, CreatedAt: app.CreatedAt}
	if def, err := apps.Parse([]byte(app.Definition)); err == nil {
		out.Form = def.InputForm()
	}
	return out, nil
}

// Run runs one turn of the app the turn names.
func (r openaiRunner) Run(ctx context.Context, t *oaicompat.Turn, emit func(oaicompat.Event) error) (*oaicompat.Answer, error) {
	switch t.Mode {
	case apps.ModeAdvancedChat:
		return r.runChatflow(ctx, t, emit)
	case apps.ModeWorkflow:
		return r.runWorkflow(ctx, t, emit)
	}
	return r.runChat(ctx, t, emit)
}

func chatRequest(t *oaicompat.Turn, streaming bool) chat.Request {
	req := chat.Request{
		AppID: t.AppID, User: t.User, Query: t.Query, Inputs: t.Inputs, ConversationID: t.ConversationID,
		AutoGenerateName: true, Streaming: streaming, Instructions: t.Instructions, Params: t.Params,
	}
	for _, h := range t.History {
		req.History = append(req.History, chat.Turn{Query: h.Query, Answer: h.Answer})
	}
	for _, f := range t.Files {
		req.Files = append(req.Files, chat.FileRef{Type: f.Type, TransferMethod: "remote_url", URL: f.URL})
	}
	return req
}

// runChat serves chat, agent and completion apps. Agent apps only run in
// streaming mode; for a blocking request their stream is collected.
func (r openaiRunner) runChat(ctx context.Context, t *oaicompat.Turn, emit func(oaicompat.Event) error) (*oaicompat.Answer, error) {
	agent := t.Mode == apps.ModeAgentChat || t.Mode == apps.ModeAgent
	req := chatRequest(t, emit != nil || agent)
	var (
		g   *chat.Generation
		err error
	)
	if t.Mode == apps.ModeCompletion {
		g, err = r.s.chat.PrepareCompletion(ctx, req)
	} else {
		g, err = r.s.chat.PrepareChat(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	start := oaicompat.Start{MessageID: g.MessageID, ConversationID: g.ConversationID, CreatedAt: g.CreatedAt}
	if emit != nil {
		if err := emit(oaicompat.Event{Start: &start}); err != nil {
			return nil, err
		}
	}
	replaced := false
	var onEvent func(chat.Event) error
	if g.Streaming {
		onEvent = func(ev chat.Event) error {
			switch e := ev.(type) {
			case chat.MessageEvent:
				if emit != nil && e.Answer != "" {
					return emit(oaicompat.Event{Text: e.Answer})
				}
			case chat.MessageReplaceEvent:
				replaced = true
			}
			return nil
		}
	}
	res, err := g.Run(ctx, onEvent)
	if err != nil {
		return nil, err
	}
	a := &oaicompat.Answer{Start: start, Text: res.Answer, FinishReason: oaicompat.FinishStop,
		Usage: oaicompat.Usage{PromptTokens: res.Metadata.Usage.PromptTokens, CompletionTokens: res.Metadata.Usage.CompletionTokens,
			TotalTokens: res.Metadata.Usage.TotalTokens}}
	switch {
	case replaced:
		a.FinishReason = oaicompat.FinishContentFilter
	case !res.Stopped && res.FinishReason == oaicompat.FinishLength:
		a.FinishReason = oaicompat.FinishLength
	}
	for _, c := range res.Metadata.RetrieverResources {
		a.Citations = append(a.Citations, c)
	}
	return a, nil
}

// runChatflow serves chatflow apps the way POST /chat-messages does:
// the chat runtime keeps the conversation and message, the engine runs
// the app's current graph, and the answer nodes' text is the answer.
func (r openaiRunner) runChatflow(ctx context.Context, t *oaicompat.Turn, emit func(oaicompat.Event) error) (*oaicompat.Answer, error) {
	s := r.s
	app, err := s.apps.Get(ctx, t.AppID)
	if err != nil {
		return nil, err
	}
	version, err := s.flows.runs.Current(ctx, app)
	if err != nil {
		return nil, err
	}
	turn, err := s.chat.PrepareChatflow(ctx, chatRequest(t, emit != nil), version.Def)
	if err != nil {
		return nil, err
	}
	graph, err := workflow.Compile(version.Def.Workflow)
	if err != nil {
		return nil, err
	}
	in := workflow.RunInput{
		Graph: graph, Mode: workflow.ModeChatflow, Inputs: turn.Inputs, Query: t.Query,
		UserID: t.User, AppID: app.ID, WorkflowID: version.ID,
		ConversationID: turn.ConversationID, MessageID: turn.MessageID,
		TaskID: turn.TaskID, RunID: uuid.NewString(),
		DialogueCount:         turn.DialogueCount,
		ConversationVariables: turn.ConversationVariables,
		History:               turn.History,
		Files:                 workflowFiles(turn.Files),
	}
	start := oaicompat.Start{MessageID: turn.MessageID, ConversationID: turn.ConversationID, CreatedAt: turn.CreatedAt}
	res, err := r.runGraph(ctx, in, turn.EndUserID, t.User, start, emit)
	if err != nil {
		return nil, err
	}
	failure := runFailure(res)
	_, err = turn.Finish(ctx, chatflowOutcome(res, failure))
	if failure != nil {
		return nil, failure
	}
	if err != nil {
		return nil, err
	}
	if err := pausedError(res); err != nil {
		return nil, err
	}
	return graphAnswer(start, res.Answer, res.TotalTokens), nil
}

// runWorkflow serves workflow apps as POST /workflows/run does, with the
// app's current graph; the answer is the run's text outputs.
func (r openaiRunner) runWorkflow(ctx context.Context, t *oaicompat.Turn, emit func(oaicompat.Event) error) (*oaicompat.Answer, error) {
	s := r.s
	app, err := s.apps.Get(ctx, t.AppID)
	if err != nil {
		return nil, err
	}
	version, err := s.flows.runs.Current(ctx, app)
	if err != nil {
		return nil, err
	}
	user, err := s.flows.users.Resolve(ctx, app.ID, t.User)
	if err != nil {
		return nil, err
	}
	attached, err := attachedFiles(s.flows.files)(ctx, app.ID, user.ID, chatRequest(t, false).Files)
	if err != nil {
		return nil, err
	}
	graph, err := workflow.Compile(version.Def.Workflow)
	if err != nil {
		return nil, err
	}
	in := workflow.RunInput{
		Graph: graph, Mode: workflow.ModeWorkflow, Inputs: t.Inputs, Files: workflowFiles(attached),
		UserID: t.User, AppID: app.ID, WorkflowID: version.ID,
		TaskID: uuid.NewString(), RunID: uuid.NewString(),
	}
	start := oaicompat.Start{MessageID: in.RunID, CreatedAt: time.Now().UTC()}
	var streamed strings.Builder
	var forward func(oaicompat.Event) error
	if emit != nil {
		forward = func(ev oaicompat.Event) error {
			streamed.WriteString(ev.Text)
			return emit(ev)
		}
	}
	res, err := r.runGraph(ctx, in, user.ID, t.User, start, forward)
	if err != nil {
		return nil, err
	}
	if failure := runFailure(res); failure != nil {
		return nil, failure
	}
	if err := pausedError(res); err != nil {
		return nil, err
	}
	answer := spokenOutputs(res.Outputs)
	if emit != nil {
		// The text chunks streamed so far are usually the outputs; send
		// what they lack, or the outputs when nothing was streamed.
		if rest, ok := strings.CutPrefix(answer, streamed.String()); ok && rest != "" {
			if err := emit(oaicompat.Event{Text: rest}); err != nil {
				return nil, err
			}
		}
	}
	return graphAnswer(start, answer, res.TotalTokens), nil
}

// runGraph runs a graph as a task the stop operations reach, reporting
// start and then every text chunk to emit (when set). A failure to emit
// (the client went away) stops the run.
func (r openaiRunner) runGraph(ctx context.Context, in workflow.RunInput, endUserID, user string, start oaicompat.Start,
	emit func(oaicompat.Event) error) (*workflow.Result, error) {
	s := r.s
	engine := s.flows.engine(workflowruns.RunMeta{EndUserID: endUserID})
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer s.flows.tasks.Track(in.TaskID, in.AppID, user, stop)()
	var onEvent func(workflow.Event)
	if emit != nil {
		if err := emit(oaicompat.Event{Start: &start}); err != nil {
			return nil, err
		}
		onEvent = func(ev workflow.Event) {
			tc, ok := ev.(*workflow.TextChunk)
			if !ok || tc.Data.Text == "" || runCtx.Err() != nil {
				return
			}
			if err := emit(oaicompat.Event{Text: tc.Data.Text}); err != nil {
				stop(err)
			}
		}
	}
	return s.flows.run(runCtx, engine, in, onEvent)
}

// pausedError is the answer to a run that paused for human input.
func pausedError(res *workflow.Result) error {
	if res.Status != workflow.RunPaused {
		return nil
	}
	return apperr.New(http.StatusBadRequest, apperr.CodeAppUnavailable,
		"The run %s paused for human input, which chat completions cannot give; answer its form and follow the run with the workflow operations.", res.RunID)
}

// graphAnswer is the answer of a chatflow or workflow run. Runs count
// tokens in total only; the answer's own tokens are estimated from its
// text and the rest is reported as prompt.
func graphAnswer(start oaicompat.Start, text string, total int) *oaicompat.Answer {
	completion := min(llm.CountTokens(text), total)
	return &oaicompat.Answer{Start: start, Text: text, FinishReason: oaicompat.FinishStop,
		Usage: oaicompat.Usage{PromptTokens: total - completion, CompletionTokens: completion, TotalTokens: total}}
}
