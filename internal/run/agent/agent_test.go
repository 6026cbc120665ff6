package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"appkb/internal/llm"
	"appkb/internal/run/agent"
	"appkb/internal/run/tools"
)

// builtin is the offline model, which calls the tools a question names.
func builtin(t *testing.T) llm.ChatModel {
	t.Helper()
	m, err := (*llm.Registry)(nil).Chat("", "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// loopModel asks for the same tool in every round it may.
type loopModel struct{ calls int }

func (m *loopModel) Chat(_ context.Context, req llm.ChatRequest) (*llm.ChatResponse, error) {
	m.calls++
	if len(req.Tools) == 0 {
		return &llm.ChatResponse{Content: "giving up"}, nil
	}
	return &llm.ChatResponse{ToolCalls: []llm.ToolCall{{ID: "c", Name: req.Tools[0].Name, Arguments: `{}`}}}, nil
}

func (m *loopModel) Stream(ctx context.Context, req llm.ChatRequest, _ func(llm.Chunk) error) (*llm.ChatResponse, error) {
	return m.Chat(ctx, req)
}

func tool(name string, run func(ctx context.Context) (*tools.Output, error)) *agent.Tool {
	return &agent.Tool{Tool: &tools.Tool{Provider: "test", Name: name, InputSchema: map[string]any{"type": "object", "properties": map[string]any{}},
		Run: func(ctx context.Context, _ *tools.Env, _ map[string]any) (*tools.Output, error) { return run(ctx) }}}
}

func TestRun(t *testing.T) {
	echo := tool("echo", func(context.Context) (*tools.Output, error) { return &tools.Output{Text: "pong"}, nil })
	broken := tool("broken", func(context.Context) (*tools.Output, error) { return nil, errors.New("the database is gone") })
	hanging := tool("hanging", func(ctx context.Context) (*tools.Output, error) {
		// Ignores its context on purpose: the loop must not wait for it.
		time.Sleep(time.Hour)
		return nil, nil
	})
	panicking := tool("panicking", func(context.Context) (*tools.Output, error) { panic("boom") })
	tests := []struct {
		name      string
		model     llm.ChatModel
		tools     []*agent.Tool
		query     string
		maxIter   int
		wantObs   []string // observations in order
		wantAns   string
		wantLimit bool
		wantRound int
	}{
		{name: "two tools in two rounds, then the answer", tools: []*agent.Tool{echo, broken}, query: "call echo, then broken",
			wantObs: []string{"pong", "Error: the database is gone."}, wantAns: "echo: pong\nbroken: Error: the database is gone.", wantRound: 3},
		{name: "a tool that never returns times out", tools: []*agent.Tool{hanging}, query: "hanging please",
			wantObs: []string{"Error: the tool hanging did not finish within 50ms."}, wantAns: "Error: the tool hanging did not finish within 50ms.", wantRound: 2},
		{name: "a tool that panics", tools: []*agent.Tool{panicking}, query: "panicking",
			wantObs: []string{"Error: the tool crashed: boom."}, wantRound: 2, wantAns: "Error: the tool crashed: boom."},
		{name: "no tool named: one round", tools: []*agent.Tool{echo}, query: "hello", wantRound: 1,
			wantAns: `I am appkb's built-in offline model: I can only quote the knowledge I am given, and this time there is none. You said: "hello"`},
		{name: "the iteration limit ends the loop with a round without tools", model: &loopModel{}, tools: []*agent.Tool{echo}, query: "x", maxIter: 2,
			wantObs: []string{"pong", "pong"}, wantAns: "giving up", wantLimit: true, wantRound: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			maxIter := tc.maxIter
			if maxIter == 0 {
				maxIter = 5
			}
			model := tc.model
			if model == nil {
				model = builtin(t)
			}
			var obs []string
			var deltas strings.Builder
			res, err := agent.Run(context.Background(), agent.Config{
				Model: model, Messages: []llm.Message{{Role: llm.RoleUser, Content: tc.query}},
				Tools: agent.NewTools(tc.tools), MaxIterations: maxIter, ToolTimeout: 50 * time.Millisecond, Stream: true,
				Hooks: agent.Hooks{
					CallDone: func(_ *agent.Round, c *agent.Call) error { obs = append(obs, c.Observation); return nil },
					Delta:    func(s string) error { deltas.WriteString(s); return nil },
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(obs, "|") != strings.Join(tc.wantObs, "|") {
				t.Errorf("observations %q, want %q", obs, tc.wantObs)
			}
			if res.Answer != tc.wantAns {
				t.Errorf("answer %q, want %q", res.Answer, tc.wantAns)
			}
			if tc.model == nil && deltas.String() != tc.wantAns {
				t.Errorf("streamed %q", deltas.String())
			}
			if len(res.Rounds) != tc.wantRound || res.LimitReached != tc.wantLimit {
				t.Errorf("%d rounds (limit %v), want %d (%v)", len(res.Rounds), res.LimitReached, tc.wantRound, tc.wantLimit)
			}
		})
	}
}

func TestRunStopsWhenAHookFails(t *testing.T) {
	stop := errors.New("client gone")
	_, err := agent.Run(context.Background(), agent.Config{
		Model: builtin(t), Messages: []llm.Message{{Role: llm.RoleUser, Content: "echo"}},
		Tools: agent.NewTools([]*agent.Tool{tool("echo", func(context.Context) (*tools.Output, error) { return &tools.Output{Text: "x"}, nil })}),
		Hooks: agent.Hooks{Thought: func(*agent.Round) error { return stop }},
	})
	if !errors.Is(err, stop) {
		t.Fatalf("error %v", err)
	}
}
