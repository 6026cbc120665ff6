package chat

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"appkb/internal/apps"
	"appkb/internal/conversation/files"
	"appkb/internal/llm"
	"appkb/internal/run/agent"
	"appkb/internal/run/tools"
	"appkb/models"
)

// thought is one stored step of an agent answer (an item of the message's
// agent_thoughts).
type thought = models.AgentThought

// stepEvent is the stream form of one step of an agent answer.
func (g *Generation) stepEvent(t *thought) AgentThoughtEvent {
	return AgentThoughtEvent{
		Event: EventAgentThought, ID: t.ID, StreamBase: g.base(), Position: t.Position,
		Thought: t.Thought, Observation: t.Observation, Tool: t.Tool, ToolLabels: t.ToolLabels,
		ToolInput: t.ToolInput, MessageFiles: t.Files,
	}
}

// agentTools resolves the enabled tools of the app's agent_mode. Old-style
// knowledge items are skipped: knowledge reaches the prompt through
// retrieval. As in Dify, a tool that cannot be loaded (its provider gone,
// say) is left out and the agent answers with the others; a warning is
// logged once per app and tool, not on every answer.
func (g *Generation) agentTools(ctx context.Context) ([]*agent.Tool, error) {
	var list []*agent.Tool
	for _, at := range g.agentMode.Tools {
		if at.Dataset != nil || !at.Enabled || at.ToolName == "" {
			continue
		}
		t, err := g.svc.cfg.Tools.Find(ctx, tools.Ref{
			ProviderType: at.ProviderType, Provider: at.ProviderName, ProviderID: at.ProviderID, Name: at.ToolName,
		})
		if err != nil {
			key := g.appID + "\x00" + at.ProviderType + "\x00" + at.ProviderName + "\x00" + at.ToolName
			if _, seen := g.svc.missingTools.LoadOrStore(key, struct{}{}); !seen {
				g.svc.log.Warn("agent: a tool cannot be loaded; the agent answers without it",
					"app", g.appID, "provider", at.ProviderName, "tool", at.ToolName, "err", err)
			}
			continue
		}
		fixed := map[string]any{}
		for k, v := range at.ToolParameters {
			if v != nil && v != "" {
				fixed[k] = v
			}
		}
		list = append(list, &agent.Tool{Tool: t, Fixed: fixed, Label: at.ToolLabel})
	}
	return agent.NewTools(list), nil
}

// runAgent answers through the agent loop: every round is streamed as
// agent_thought events (once when the model has spoken, again with the
// observations), the answer text as agent_message chunks, and files the
// tools make as message_file events.
func (g *Generation) runAgent(ctx context.Context, emit func(Event) error, out *outcome) {
	start := time.Now()
	list, err := g.agentTools(ctx)
	if err != nil {
		out.err = err
		out.usage = wireUsage(llm.Usage{}, 0)
		return
	}
	labels := map[string]any{}
	for _, t := range list {
		labels[t.Fn] = map[string]any{"en_US": t.Label, "zh_Hans": t.Label}
	}
	var buf strings.Builder
	withheld := ""
	byRound := map[int]*thought{}
	env := &tools.Env{AppID: g.appID, UserID: g.user, Guard: g.svc.cfg.Tools.Guard()}
	res, err := agent.Run(ctx, agent.Config{
		Model: g.model, Messages: g.prompt.Messages, Tools: list, MaxIterations: g.agentMode.MaxIterations(),
		Params: g.params, Knowledge: g.knowledge, Env: env, Stream: true,
		Hooks: agent.Hooks{
			Delta: func(text string) error {
				buf.WriteString(text)
				if preset, hit := g.filter.checkOutput(buf.String()); hit {
					withheld = preset
					return errWithheld
				}
				return emit(g.messageEvent(text))
			},
			Thought: func(r *agent.Round) error {
				t := &thought{
					ID: uuid.NewString(), MessageID: g.MessageID, Position: r.Position, Thought: r.Thought,
					ToolLabels: map[string]any{}, Files: []string{}, CreatedAt: r.Started.Unix(),
				}
				if len(r.Calls) > 0 {
					names := make([]string, len(r.Calls))
					for i, c := range r.Calls {
						names[i] = c.Fn
						if l, ok := labels[c.Fn]; ok {
							t.ToolLabels[c.Fn] = l
						}
					}
					t.Tool = strings.Join(names, ";")
				}
				byRound[r.Position] = t
				out.thoughts = append(out.thoughts, t)
				return emit(g.stepEvent(t))
			},
			CallDone: func(r *agent.Round, c *agent.Call) error {
				t := byRound[r.Position]
				if c.Output == nil || len(c.Output.Files) == 0 {
					return nil
				}
				for _, f := range c.Output.Files {
					rf, err := g.saveToolFile(ctx, f)
					if err != nil {
						return err
					}
					g.files = append(g.files, rf)
					t.Files = append(t.Files, rf.ID)
					if err := emit(MessageFileEvent{Event: EventMessageFile, ID: rf.ID, StreamBase: g.base(), Type: rf.Type, BelongsTo: rf.BelongsTo, URL: rf.URL}); err != nil {
						return err
					}
				}
				return nil
			},
			RoundEnd: func(r *agent.Round) error {
				if len(r.Calls) == 0 {
					return nil
				}
				t := byRound[r.Position]
				inputs, observations := map[string]any{}, map[string]any{}
				for _, c := range r.Calls {
					inputs[c.Fn] = c.Input
					observations[c.Fn] = c.Observation
				}
				t.ToolInput = mustJSON(inputs, "{}")
				t.Observation = mustJSON(observations, "{}")
				return emit(g.stepEvent(t))
			},
		},
	})
	latency := time.Since(start)
	u := llm.Usage{}
	if res != nil {
		u = res.Usage
		if res.Price > 0 {
			u.TotalPrice = fmt.Sprintf("%.7f", res.Price)
			u.Currency = res.Currency
		}
	}
	out.usage = wireUsage(u, latency)
	out.answer = buf.String()
	if res != nil && res.Answer != "" && (err == nil || out.answer == "") {
		out.answer = res.Answer
	}
	g.settle(ctx, out, withheld, true, emit, err)
}

// saveToolFile keeps a file a tool made as a file of the answer.
func (g *Generation) saveToolFile(ctx context.Context, f tools.File) (ResolvedFile, error) {
	store := g.svc.cfg.Files
	if store == nil {
		return ResolvedFile{}, fmt.Errorf("a tool made the file %q, but this server keeps no files for answers", f.Name)
	}
	row, err := store.Save(ctx, files.Rules{}, g.appID, g.endUserID, f.Name, f.MimeType, bytes.NewReader(f.Data))
	if err != nil {
		return ResolvedFile{}, err
	}
	kind := files.KindOf(row.Extension)
	return ResolvedFile{
		ID: row.ID, Filename: row.Name, Type: kind, URL: "/v1/files/" + row.ID + "/preview", MimeType: row.MimeType,
		Size: row.Size, TransferMethod: "tool_file", BelongsTo: "assistant", UploadFileID: row.ID,
	}, nil
}

// agentModeOf is the agent loop configuration of an app; DSL 0.7 agent
// apps keep none, so they run without tools.
func agentModeOf(mc *apps.ModelConfig) apps.AgentMode {
	if mc == nil {
		return apps.AgentMode{}
	}
	return mc.AgentMode
}
