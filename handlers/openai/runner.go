package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"appkb/handlers/oaicompat"
	"appkb/internal/apps"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/chat"
	"appkb/internal/run/flows"
	"appkb/internal/run/workflow"
)

// runner runs the turns of the OpenAI-compatible endpoint through flows,
// the same runs the Dify operations start. It is the only place where
// oaicompat meets the runtimes.
type runner struct {
	apps  *apps.Store
	flows *flows.Service
}

var _ oaicompat.Runner = runner{}

// App describes the key's app with its input form.
func (r runner) App(ctx context.Context, appID string) (*oaicompat.App, error) {
	app, err := r.apps.Cached(ctx, appID)
	if err != nil {
		return nil, err
	}
	out := &oaicompat.App{ID: app.ID, Name: app.Name, Mode: app.Mode, CreatedAt: app.CreatedAt}
	if def, err := apps.Parse([]byte(app.Definition)); err == nil {
		out.Form = def.InputForm()
	}
	return out, nil
}

// flowRequest is the run a turn asks for. Agent apps always run streaming
// (Dify has no blocking agent answers); a blocking turn collects them.
func flowRequest(t *oaicompat.Turn, streaming bool) flows.Request {
	req := flows.Request{Request: chat.Request{
		AppID: t.AppID, User: t.User, Query: t.Query, Inputs: t.Inputs, ConversationID: t.ConversationID,
		AutoGenerateName: true, Streaming: streaming, Instructions: t.Instructions, Params: t.Params,
	}}
	for _, h := range t.History {
		req.History = append(req.History, chat.Turn{Query: h.Query, Answer: h.Answer})
	}
	for _, f := range t.Files {
		req.Files = append(req.Files, chat.FileRef{Type: f.Type, TransferMethod: "remote_url", URL: f.URL})
	}
	return req
}

// Run runs one turn of the app the turn names, reporting its start and its
// answer text to emit as they come when emit is set.
func (r runner) Run(ctx context.Context, t *oaicompat.Turn, emit func(oaicompat.Event) error) (*oaicompat.Answer, error) {
	agent := t.Mode == apps.ModeAgentChat || t.Mode == apps.ModeAgent
	run, err := r.flows.Run(ctx, flowRequest(t, emit != nil || agent))
	if err != nil {
		return nil, err
	}
	var (
		start    *oaicompat.Start
		streamed strings.Builder
		replaced bool
	)
	send := func(ev oaicompat.Event) error {
		if err := emit(ev); err != nil {
			run.Cancel(err) // the client went away: stop the run
			for range run.Events() {
			}
			return err
		}
		return nil
	}
	for ev := range run.Events() {
		if emit == nil {
			continue
		}
		if start == nil {
			start = startOf(ev.Payload)
			if err := send(oaicompat.Event{Start: start}); err != nil {
				return nil, err
			}
		}
		if _, ok := ev.Payload.(chat.MessageReplaceEvent); ok {
			replaced = true
		}
		if ev.Delta != "" {
			streamed.WriteString(ev.Delta)
			if err := send(oaicompat.Event{Text: ev.Delta}); err != nil {
				return nil, err
			}
		}
	}
	res, err := run.Wait()
	if err != nil {
		return nil, err
	}
	if res.Failure != nil {
		return nil, res.Failure
	}
	if res.Status == workflow.RunPaused {
		return nil, apperr.New(http.StatusBadRequest, apperr.CodeAppUnavailable,
			"The run %s paused for human input, which chat completions cannot give; answer its form and follow the run with the workflow operations.", res.WorkflowRunID)
	}
	if start == nil {
		start = &oaicompat.Start{MessageID: res.MessageID, ConversationID: res.ConversationID, CreatedAt: time.Now().UTC()}
		if start.MessageID == "" {
			start.MessageID = res.WorkflowRunID
		}
		if emit != nil {
			if err := send(oaicompat.Event{Start: start}); err != nil {
				return nil, err
			}
		}
	}
	switch t.Mode {
	case apps.ModeWorkflow:
		answer := flows.TextOutputs(res.Outputs)
		if emit != nil {
			// The text chunks streamed so far are usually the outputs; send
			// what they lack, or the outputs when nothing was streamed.
			if rest, ok := strings.CutPrefix(answer, streamed.String()); ok && rest != "" {
				if err := send(oaicompat.Event{Text: rest}); err != nil {
					return nil, err
				}
			}
		}
		return graphAnswer(*start, answer, res.TotalTokens), nil
	case apps.ModeAdvancedChat:
		return graphAnswer(*start, res.Answer, res.TotalTokens), nil
	}
	a := &oaicompat.Answer{Start: *start, Text: res.Answer, FinishReason: oaicompat.FinishStop,
		Usage: oaicompat.Usage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, TotalTokens: res.TotalTokens}}
	switch {
	case replaced:
		a.FinishReason = oaicompat.FinishContentFilter
	case !res.Stopped && res.FinishReason == oaicompat.FinishLength:
		a.FinishReason = oaicompat.FinishLength
	}
	for _, c := range res.Citations {
		a.Citations = append(a.Citations, c)
	}
	return a, nil
}

// startOf reads the ids and time of a turn from the first event of its
// stream: every event of the Service API carries them.
func startOf(payload any) *oaicompat.Start {
	var ids struct {
		MessageID      string `json:"message_id"`
		ConversationID string `json:"conversation_id"`
		WorkflowRunID  string `json:"workflow_run_id"`
		CreatedAt      int64  `json:"created_at"`
	}
	if b, err := json.Marshal(payload); err == nil {
		_ = json.Unmarshal(b, &ids)
	}
	s := &oaicompat.Start{MessageID: ids.MessageID, ConversationID: ids.ConversationID, CreatedAt: time.Now().UTC()}
	if s.MessageID == "" {
		s.MessageID = ids.WorkflowRunID
	}
	if ids.CreatedAt > 0 {
		s.CreatedAt = time.Unix(ids.CreatedAt, 0).UTC()
	}
	return s
}

// graphAnswer is the answer of a chatflow or workflow run. Runs count
// tokens in total only; the answer's own tokens are estimated from its
// text and the rest is reported as prompt.
func graphAnswer(start oaicompat.Start, text string, total int) *oaicompat.Answer {
	completion := min(llm.CountTokens(text), total)
	return &oaicompat.Answer{Start: start, Text: text, FinishReason: oaicompat.FinishStop,
		Usage: oaicompat.Usage{PromptTokens: total - completion, CompletionTokens: completion, TotalTokens: total}}
}
