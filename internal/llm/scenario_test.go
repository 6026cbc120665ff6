package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"appkb/internal/platform/apperr"
)

const testScenario = `
rules:
  - name: per app
    app: travel
    query: weather
    answer: Sunny in the travel app.
  - name: second turn
    turn: 2
    answer: This is the second question.
  - name: substring
    query: refund
    chunks: ["Refunds ", "take ", "five days."]
    chunk_delay: 1ms
  - name: regex
    regex: '^order #\d+$'
    answer: Your order has shipped.
    usage: {prompt_tokens: 11, completion_tokens: 22}
  - name: thinking
    query: think first
    reasoning: Let me consider this.
    answer: Done thinking.
  - name: tools
    query: add numbers
    tool_calls:
      - name: add
        arguments: {a: 2, b: 3}
    answer: "The sum is {{observation}}."
  - name: extract
    query: extract
    structured: {city: Paris, nights: 3}
  - name: rate limited
    query: rate me
    fail: rate_limit
  - name: quota
    query: quota please
    fail: quota
  - name: server error
    query: break
    fail: server_error
  - name: timeout
    query: slow
    fail: timeout
  - name: malformed
    query: garbage
    fail: malformed
  - name: unauthorized
    query: badkey
    fail: unauthorized
  - name: cut mid-stream
    query: cut
    chunks: ["Half ", "an "]
    fail: server_error
`

func scenarioModel(t *testing.T) ChatModel {
	t.Helper()
	sc, err := ParseScenario([]byte(testScenario))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	r.FollowScenarios(NewScenarios(sc))
	m, err := r.Chat("langgenius/openai/openai", "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func user(q string) Message { return Message{Role: "user", Content: q} }

func TestScenarioAnswers(t *testing.T) {
	m := scenarioModel(t)
	travel := WithApp(context.Background(), "app-1", "travel")
	tests := []struct {
		name       string
		ctx        context.Context
		msgs       []Message
		want       string
		wantChunks []string
		wantCalls  string
		wantUsage  [2]int
	}{
		{name: "app rule in its app", ctx: travel, msgs: []Message{user("How is the weather?")}, want: "Sunny in the travel app."},
		{name: "app rule skipped elsewhere", ctx: context.Background(), msgs: []Message{user("How is the weather?")},
			want: BuiltinAnswer(ChatRequest{Messages: []Message{user("How is the weather?")}})},
		{name: "turn", msgs: []Message{user("hi"), {Role: "assistant", Content: "hello"}, user("and now?")}, want: "This is the second question."},
		{name: "substring, case-insensitive, in the chunks given", msgs: []Message{user("About my REFUND")},
			want: "Refunds take five days.", wantChunks: []string{"Refunds ", "take ", "five days."}},
		{name: "regex and usage", msgs: []Message{user("order #123")}, want: "Your order has shipped.", wantUsage: [2]int{11, 22}},
		{name: "regex not matched falls back", msgs: []Message{user("order #12x")},
			want: BuiltinAnswer(ChatRequest{Messages: []Message{user("order #12x")}})},
		{name: "reasoning", msgs: []Message{user("think first")}, want: "<think>\nLet me consider this.\n</think>\nDone thinking."},
		{name: "tool call", msgs: []Message{user("add numbers please")}, wantCalls: `add{"a":2,"b":3}`},
		{name: "the turn after the tool sees its observation", msgs: []Message{user("add numbers please"),
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":2,"b":3}`}}},
			{Role: "tool", ToolCallID: "c1", Content: "5"}}, want: "The sum is 5."},
		{name: "structured output", msgs: []Message{user("extract this")}, want: `{"city":"Paris","nights":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			req := ChatRequest{Messages: tt.msgs}
			for _, streaming := range []bool{false, true} {
				var resp *ChatResponse
				var err error
				var chunks []string
				var streamedCalls []ToolCall
				if streaming {
					resp, err = m.Stream(ctx, req, func(c Chunk) error {
						if c.Delta != "" {
							chunks = append(chunks, c.Delta)
						}
						streamedCalls = append(streamedCalls, c.ToolCalls...)
						return nil
					})
				} else {
					resp, err = m.Chat(ctx, req)
				}
				if err != nil {
					t.Fatalf("streaming=%v: %v", streaming, err)
				}
				if tt.wantCalls != "" {
					if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name+resp.ToolCalls[0].Arguments != tt.wantCalls || resp.FinishReason != "tool_calls" {
						t.Fatalf("streaming=%v: calls %+v, finish %q", streaming, resp.ToolCalls, resp.FinishReason)
					}
					if streaming && len(streamedCalls) != 1 {
						t.Fatalf("streamed calls %+v", streamedCalls)
					}
					continue
				}
				if resp.Content != tt.want {
					t.Fatalf("streaming=%v: answer %q, want %q", streaming, resp.Content, tt.want)
				}
				if streaming && strings.Join(chunks, "") != tt.want {
					t.Fatalf("chunks %q do not make the answer %q", chunks, tt.want)
				}
				if streaming && tt.wantChunks != nil && strings.Join(chunks, "|") != strings.Join(tt.wantChunks, "|") {
					t.Fatalf("chunks %q, want %q", chunks, tt.wantChunks)
				}
				if tt.wantUsage != [2]int{} && (resp.Usage.PromptTokens != tt.wantUsage[0] || resp.Usage.CompletionTokens != tt.wantUsage[1]) {
					t.Fatalf("usage %+v", resp.Usage)
				}
			}
		})
	}
}

// A scripted failure comes back as the same error a remote provider's
// failure of that kind does.
func TestScenarioFailures(t *testing.T) {
	m := scenarioModel(t)
	tests := []struct {
		query, code, message string
		chunks               int
	}{
		{"rate me", apperr.CodeProviderQuotaExceeded, "rate limiting", 0},
		{"quota please", apperr.CodeProviderQuotaExceeded, "quota is used up", 0},
		{"break", apperr.CodeCompletionRequestError, "HTTP 500", 0},
		{"slow", apperr.CodeCompletionRequestError, "did not answer in time", 0},
		{"garbage", apperr.CodeCompletionRequestError, "failed", 0},
		{"badkey", apperr.CodeProviderNotInitialize, "rejected the credentials", 0},
		{"cut", apperr.CodeCompletionRequestError, "HTTP 500", 2},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			req := ChatRequest{Messages: []Message{user(tt.query)}}
			_, err := m.Chat(context.Background(), req)
			var e *apperr.Error
			if !errors.As(err, &e) || e.Code != tt.code || !strings.Contains(e.Message, tt.message) {
				t.Fatalf("blocking: got %v, want %s containing %q", err, tt.code, tt.message)
			}
			n := 0
			_, err = m.Stream(context.Background(), req, func(c Chunk) error { n++; return nil })
			if !errors.As(err, &e) || e.Code != tt.code || n != tt.chunks {
				t.Fatalf("streaming: got %v after %d chunks, want %s after %d", err, n, tt.code, tt.chunks)
			}
		})
	}
}

func TestScenarioDelayAndCancel(t *testing.T) {
	sc, err := ParseScenario([]byte("rules:\n  - chunks: [a, b, c]\n    chunk_delay: 40ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := &scenarioChat{builtin: &builtinChat{model: "m"}, scenarios: NewScenarios(sc), provider: "p"}
	var gaps []time.Duration
	last := time.Now()
	if _, err := m.Stream(context.Background(), ChatRequest{Messages: []Message{user("x")}}, func(Chunk) error {
		gaps = append(gaps, time.Since(last))
		last = time.Now()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, g := range gaps {
		if g < 40*time.Millisecond {
			t.Fatalf("a chunk came %v after the one before, before its delay", g)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Chat(ctx, ChatRequest{Messages: []Message{user("x")}}); !apperr.Is(err, apperr.CodeCompletionRequestError) {
		t.Fatalf("a cancelled call: %v", err)
	}
}

func TestScenarioPerAppComesFirst(t *testing.T) {
	global, _ := ParseScenario([]byte("rules:\n  - answer: global\n"))
	own, _ := ParseScenario([]byte("rules:\n  - answer: own\n"))
	s := NewScenarios(global)
	s.SetApp("a1", own)
	m := &scenarioChat{builtin: &builtinChat{model: "m"}, scenarios: s, provider: "p"}
	req := ChatRequest{Messages: []Message{user("x")}}
	for _, tt := range []struct{ app, want string }{{"a1", "own"}, {"a2", "global"}} {
		resp, err := m.Chat(WithApp(context.Background(), tt.app, ""), req)
		if err != nil || resp.Content != tt.want {
			t.Fatalf("app %s: %v %v", tt.app, resp, err)
		}
	}
	s.SetApp("a1", nil)
	if resp, _ := m.Chat(WithApp(context.Background(), "a1", ""), req); resp.Content != "global" {
		t.Fatalf("after removing the app's scenario: %q", resp.Content)
	}
}

func TestParseScenarioErrors(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"rules:\n  - regex: '('\n", "regex"},
		{"rules:\n  - fail: explode\n", "fail must be one of"},
		{"rules:\n  - tool_calls: [{arguments: {}}]\n", "needs a name"},
		{"rules:\n  - tool_calls: [{name: x, arguments: 'not json'}]\n", "not JSON"},
		{"rules:\n  - chunks: [a]\n    answer: b\n", "chunks joined"},
		{"rules:\n  - anwser: typo\n", "anwser"},
		{"rules:\n  - chunk_delay: 2h\n", "chunk_delay"},
	} {
		if _, err := ParseScenario([]byte(tt.text)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want an error about %q", tt.text, err, tt.want)
		}
	}
}
