// Package agent is the one tool-calling loop of appkb. Agent apps
// (agent-chat) and the agent nodes of workflows both run it: the model gets
// the tools, the calls it asks for run and their results go back to it,
// round after round, until it answers without calling a tool or the
// iteration limit is reached. After the last round that offers tools one
// more round follows without them, so the model has to answer.
//
// Both strategies of Dify's agents, function calling and ReAct, use the
// model's native tool calls here; the strategy name is kept for reporting.
//
// A failing tool never ends the loop: its error, a timeout or an
// unreachable server becomes the call's observation, which the model sees
// and the caller reports. Only a failing model call or a cancelled context
// end a run with an error.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"appkb/internal/llm"
	"appkb/internal/run/tools"
)

// Limits of a run.
const (
	// MaxIterations caps the rounds that offer tools.
	MaxIterations = 50
	// DefaultToolTimeout bounds one tool call when Config.ToolTimeout is
	// zero.
	DefaultToolTimeout = 2 * time.Minute
	// maxObservation bounds the observation text handed to the model.
	maxObservation = 100_000
)

// Tool is a tool as one agent offers it to the model.
type Tool struct {
	// Fn is the function name the model sees.
	Fn   string
	Tool *tools.Tool
	// Fixed holds arguments the author set; the model cannot change them.
	Fixed map[string]any
	// Description replaces the tool's own when set.
	Description string
	// Label is the name people see.
	Label string
}

var fnNameRe = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// NewTools names the tools for the model: each gets its tool name, made
// safe for function names, and a suffix when two tools share it.
func NewTools(list []*Tool) []*Tool {
	used := map[string]bool{}
	for _, t := range list {
		fn := fnNameRe.ReplaceAllString(t.Tool.Name, "_")
		if used[fn] {
			fn = fnNameRe.ReplaceAllString(t.Tool.Provider+"_"+t.Tool.Name, "_")
		}
		for i := 2; used[fn]; i++ {
			fn = fmt.Sprintf("%s_%d", fnNameRe.ReplaceAllString(t.Tool.Name, "_"), i)
		}
		used[fn] = true
		t.Fn = fn
		if t.Label == "" {
			t.Label = t.Tool.Label
		}
		if t.Label == "" {
			t.Label = t.Tool.Name
		}
	}
	return list
}

// Call is one tool call of a round.
type Call struct {
	ID   string
	Fn   string
	Tool *Tool // nil when the model named no offered tool
	// Input holds the arguments used.
	Input map[string]any
	// Observation is what the model is told: the tool's text, or the
	// error.
	Observation string
	// Error is set when the call failed.
	Error   string
	Output  *tools.Output
	Elapsed time.Duration
}

// Round is one model call and the tool calls it asked for.
type Round struct {
	// Position counts from 1.
	Position int
	// Thought is the text the model wrote in this round.
	Thought string
	Calls   []*Call
	// Final marks the round that answered.
	Final   bool
	Usage   llm.Usage
	Started time.Time
	Elapsed time.Duration
}

// Hooks let a caller report progress; each may be nil. An error from a
// hook stops the run with that error.
type Hooks struct {
	// RoundStart is called before the model call of a round.
	RoundStart func(r *Round) error
	// Delta receives the answer text as the model streams it.
	Delta func(text string) error
	// Thought is called once the model has answered in a round, before
	// its tool calls run.
	Thought func(r *Round) error
	// CallDone is called after each tool call.
	CallDone func(r *Round, c *Call) error
	// RoundEnd is called when a round is over.
	RoundEnd func(r *Round) error
}

// Config is one run.
type Config struct {
	Model llm.ChatModel
	// Messages are the prompt: system, history and the user's query.
	Messages []llm.Message
	Tools    []*Tool
	// MaxIterations bounds the rounds that offer tools (1…MaxIterations).
	MaxIterations int
	Params        map[string]any
	Knowledge     []string
	// Env is handed to every tool.
	Env *tools.Env
	// ToolTimeout bounds one tool call; DefaultToolTimeout when zero.
	ToolTimeout time.Duration
	// Stream streams the model's text through Hooks.Delta.
	Stream bool
	Hooks  Hooks
}

// Result is a finished run.
type Result struct {
	Answer string
	Rounds []*Round
	Usage  llm.Usage
	// Price is the summed price of the model calls; Currency its unit.
	Price    float64
	Currency string
	// LimitReached is set when the model still called tools in the last
	// round that offered them.
	LimitReached bool
}

// Run runs the loop.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	maxIter := min(max(cfg.MaxIterations, 1), MaxIterations)
	offer := make([]llm.Tool, len(cfg.Tools))
	byFn := map[string]*Tool{}
	for i, t := range cfg.Tools {
		desc := t.Description
		if strings.TrimSpace(desc) == "" {
			desc = t.Tool.Description
		}
		offer[i] = llm.Tool{Name: t.Fn, Label: t.Label, Description: desc, Parameters: t.Tool.Schema(t.Fixed)}
		byFn[t.Fn] = t
	}
	hook := func(f func(*Round) error, r *Round) error {
		if f == nil {
			return nil
		}
		return f(r)
	}
	msgs := append([]llm.Message(nil), cfg.Messages...)
	res := &Result{}
	for pos := 1; pos <= maxIter+1; pos++ {
		r := &Round{Position: pos, Started: time.Now()}
		res.Rounds = append(res.Rounds, r)
		if err := hook(cfg.Hooks.RoundStart, r); err != nil {
			return res, err
		}
		req := llm.ChatRequest{Messages: msgs, Params: cfg.Params, Knowledge: cfg.Knowledge}
		if pos <= maxIter && len(offer) > 0 {
			req.Tools = offer
		}
		var resp *llm.ChatResponse
		var err error
		if cfg.Stream && cfg.Hooks.Delta != nil {
			resp, err = cfg.Model.Stream(ctx, req, func(ch llm.Chunk) error {
				if ch.Delta == "" {
					return nil
				}
				return cfg.Hooks.Delta(ch.Delta)
			})
		} else {
			resp, err = cfg.Model.Chat(ctx, req)
		}
		if err != nil {
			r.Elapsed = time.Since(r.Started)
			return res, err
		}
		res.add(resp.Usage)
		r.Usage = resp.Usage
		r.Thought = resp.Content
		calls := resp.ToolCalls
		if req.Tools == nil {
			calls = nil
		}
		if len(calls) == 0 {
			r.Final = true
			r.Elapsed = time.Since(r.Started)
			res.Answer = resp.Content
			if err := hook(cfg.Hooks.Thought, r); err != nil {
				return res, err
			}
			if err := hook(cfg.Hooks.RoundEnd, r); err != nil {
				return res, err
			}
			return res, nil
		}
		if pos == maxIter {
			res.LimitReached = true
		}
		for _, c := range calls {
			r.Calls = append(r.Calls, &Call{ID: c.ID, Fn: c.Name, Tool: byFn[c.Name], Input: map[string]any{}})
		}
		if err := hook(cfg.Hooks.Thought, r); err != nil {
			return res, err
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Content, ToolCalls: calls})
		for i, c := range calls {
			call := r.Calls[i]
			cfg.invoke(ctx, call, c.Arguments)
			if cfg.Hooks.CallDone != nil {
				if err := cfg.Hooks.CallDone(r, call); err != nil {
					return res, err
				}
			}
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: call.Observation})
		}
		r.Elapsed = time.Since(r.Started)
		if err := hook(cfg.Hooks.RoundEnd, r); err != nil {
			return res, err
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (res *Result) add(u llm.Usage) {
	res.Usage.PromptTokens += u.PromptTokens
	res.Usage.CompletionTokens += u.CompletionTokens
	res.Usage.TotalTokens += u.TotalTokens
	res.Usage.Latency += u.Latency
	if p, err := strconv.ParseFloat(u.TotalPrice, 64); err == nil {
		res.Price += p
	}
	if u.Currency != "" {
		res.Currency = u.Currency
	}
}

// invoke runs one call and fills in its input, observation and error.
func (cfg *Config) invoke(ctx context.Context, call *Call, arguments string) {
	start := time.Now()
	defer func() { call.Elapsed = time.Since(start) }()
	fail := func(msg string) {
		call.Error = msg
		call.Observation = "Error: " + strings.TrimSuffix(msg, ".") + "."
	}
	at := call.Tool
	if at == nil {
		fail(fmt.Sprintf("there is no tool named %q", call.Fn))
		return
	}
	if s := strings.TrimSpace(arguments); s != "" {
		if err := json.Unmarshal([]byte(s), &call.Input); err != nil || call.Input == nil {
			call.Input = map[string]any{}
			fail("the arguments are not a JSON object")
			return
		}
	}
	for k, v := range at.Fixed {
		call.Input[k] = v
	}
	prepared, err := at.Tool.Prepare(call.Input)
	if err != nil {
		fail(err.Error())
		return
	}
	call.Input = prepared
	out, err := cfg.runTool(ctx, at, prepared)
	if err != nil {
		fail(err.Error())
		return
	}
	call.Output = out
	obs := out.Text
	if obs == "" && len(out.JSON) > 0 {
		data, _ := json.Marshal(out.JSON)
		obs = string(data)
	}
	if obs == "" && len(out.Files) > 0 {
		names := make([]string, len(out.Files))
		for i, f := range out.Files {
			names[i] = f.Name
		}
		obs = "Files made: " + strings.Join(names, ", ")
	}
	if len(obs) > maxObservation {
		obs = obs[:maxObservation] + "…"
	}
	call.Observation = obs
}

// runTool runs a tool under the call timeout. A tool that does not return
// when its context ends is left behind, so the loop never hangs on it.
func (cfg *Config) runTool(ctx context.Context, at *Tool, args map[string]any) (*tools.Output, error) {
	timeout := cfg.ToolTimeout
	if timeout <= 0 {
		timeout = DefaultToolTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		out *tools.Output
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("the tool crashed: %v", p)}
			}
		}()
		out, err := at.Tool.Run(ctx, cfg.Env, args)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		if r.err != nil && ctx.Err() == context.DeadlineExceeded {
			return nil, fmt.Errorf("the tool %s did not finish within %s", at.Fn, timeout)
		}
		if r.err == nil && r.out == nil {
			r.out = &tools.Output{}
		}
		return r.out, r.err
	case <-ctx.Done():
		if ctx.Err() == context.DeadlineExceeded {
			return nil, fmt.Errorf("the tool %s did not finish within %s", at.Fn, timeout)
		}
		return nil, ctx.Err()
	}
}
