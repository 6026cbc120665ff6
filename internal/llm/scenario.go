package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// A Scenario scripts the built-in chat model for the tests of a client:
// its rules are tried in order on every call, and the first that matches
// says what the model answers. Calls no rule matches get the built-in
// model's usual answer. A scenario holds no state, so the same scenario and
// the same requests always give the same answers.
type Scenario struct {
	Rules []ScenarioRule `yaml:"rules" json:"rules"`
}

// ScenarioRule is one scripted answer and the calls it applies to. Every
// condition that is set must hold; a rule with none matches every call.
type ScenarioRule struct {
	// Name only labels the rule in errors and logs.
	Name string `yaml:"name" json:"name,omitempty"`

	// App is an app's id or name; empty matches every app.
	App string `yaml:"app" json:"app,omitempty"`
	// Query is text the question must contain (case-insensitive).
	Query string `yaml:"query" json:"query,omitempty"`
	// Regex is a regular expression (Go syntax) the question must match.
	Regex string `yaml:"regex" json:"regex,omitempty"`
	// Turn is the question's number in its conversation, counted from 1
	// over the user messages sent to the model; 0 matches any turn.
	Turn int `yaml:"turn" json:"turn,omitempty"`

	// Answer is the text of the answer. In the turn after the rule's tool
	// calls, {{observation}} in it stands for what the last tool answered.
	Answer string `yaml:"answer" json:"answer,omitempty"`
	// Chunks, when set, are the streamed pieces of the answer (joined, they
	// are the answer); otherwise the answer is streamed word by word.
	Chunks []string `yaml:"chunks" json:"chunks,omitempty"`
	// ChunkDelay is waited before every streamed piece (and once before a
	// blocking answer), e.g. "50ms".
	ChunkDelay time.Duration `yaml:"chunk_delay" json:"chunk_delay,omitempty"`
	// Reasoning is thinking text put before the answer in a <think> block,
	// as reasoning models write it.
	Reasoning string `yaml:"reasoning" json:"reasoning,omitempty"`
	// ToolCalls are asked for when the question has not been answered by a
	// tool yet; the next call (which carries the tools' observations) is
	// answered with Answer.
	ToolCalls []ScenarioToolCall `yaml:"tool_calls" json:"tool_calls,omitempty"`
	// Structured is answered as JSON text: what parameter-extractor and
	// question-classifier nodes (and structured output) read.
	Structured any `yaml:"structured" json:"structured,omitempty"`
	// Usage replaces the counted tokens.
	Usage *ScenarioUsage `yaml:"usage" json:"usage,omitempty"`
	// Fail makes the call fail as a provider's would: rate_limit, quota,
	// server_error, unauthorized, timeout or malformed. Chunks given with
	// it are streamed first, as a provider that breaks off mid-answer.
	Fail string `yaml:"fail" json:"fail,omitempty"`

	re *regexp.Regexp
}

// ScenarioToolCall is one tool the scripted model calls.
type ScenarioToolCall struct {
	Name string `yaml:"name" json:"name"`
	// Arguments is a JSON object, or JSON text.
	Arguments any `yaml:"arguments" json:"arguments,omitempty"`
}

// ScenarioUsage gives the token counts a scripted answer reports.
type ScenarioUsage struct {
	PromptTokens     int `yaml:"prompt_tokens" json:"prompt_tokens"`
	CompletionTokens int `yaml:"completion_tokens" json:"completion_tokens"`
}

// The failures a rule can script.
var scenarioFailures = map[string]bool{
	"rate_limit": true, "quota": true, "server_error": true,
	"unauthorized": true, "timeout": true, "malformed": true,
}

// maxScenario bounds a scenario file or body.
const maxScenario = 4 << 20

// LoadScenario reads a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxScenario+1))
	if err != nil {
		return nil, err
	}
	s, err := ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseScenario reads a scenario from YAML (or JSON) text and checks it.
func ParseScenario(data []byte) (*Scenario, error) {
	if len(data) > maxScenario {
		return nil, fmt.Errorf("a scenario is at most %d bytes", maxScenario)
	}
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	for i := range s.Rules {
		r := &s.Rules[i]
		label := fmt.Sprintf("rules[%d]", i)
		if r.Name != "" {
			label += " (" + r.Name + ")"
		}
		if r.Regex != "" {
			re, err := regexp.Compile(r.Regex)
			if err != nil {
				return nil, fmt.Errorf("%s: regex: %w", label, err)
			}
			r.re = re
		}
		if r.Fail != "" && !scenarioFailures[r.Fail] {
			return nil, fmt.Errorf("%s: fail must be one of rate_limit, quota, server_error, unauthorized, timeout or malformed, not %q", label, r.Fail)
		}
		if r.Turn < 0 || r.ChunkDelay < 0 || r.ChunkDelay > time.Minute {
			return nil, fmt.Errorf("%s: turn must not be negative and chunk_delay at most a minute", label)
		}
		if r.Chunks != nil && r.Answer != "" && strings.Join(r.Chunks, "") != r.Answer {
			return nil, fmt.Errorf("%s: the chunks joined must be the answer (or leave answer out)", label)
		}
		for j, tc := range r.ToolCalls {
			if tc.Name == "" {
				return nil, fmt.Errorf("%s: tool_calls[%d] needs a name", label, j)
			}
			if _, err := scriptedArguments(tc.Arguments); err != nil {
				return nil, fmt.Errorf("%s: tool_calls[%d]: %w", label, j, err)
			}
		}
		if r.Structured != nil {
			if _, err := json.Marshal(r.Structured); err != nil {
				return nil, fmt.Errorf("%s: structured: %w", label, err)
			}
		}
	}
	return &s, nil
}

// Scenarios holds the scenario every app follows and those set for single
// apps, which come first. It is safe for concurrent use; the admin API
// changes it while the server runs.
type Scenarios struct {
	mu      sync.RWMutex
	initial *Scenario // what the server started with, which Reset restores
	global  *Scenario
	perApp  map[string]*Scenario
}

// NewScenarios starts with global (nil for none).
func NewScenarios(global *Scenario) *Scenarios {
	return &Scenarios{initial: global, global: global, perApp: map[string]*Scenario{}}
}

// Reset forgets every app's scenario and puts back the one the server
// started with.
func (s *Scenarios) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.global = s.initial
	clear(s.perApp)
}

// SetApp sets (or, with nil, removes) the scenario of one app.
func (s *Scenarios) SetApp(appID string, sc *Scenario) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc == nil {
		delete(s.perApp, appID)
		return
	}
	s.perApp[appID] = sc
}

// SetGlobal replaces the scenario every app follows.
func (s *Scenarios) SetGlobal(sc *Scenario) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.global = sc
}

// match finds the rule for one call.
func (s *Scenarios) match(ctx context.Context, req ChatRequest) *ScenarioRule {
	app := scenarioAppOf(ctx)
	s.mu.RLock()
	own, global := s.perApp[app.id], s.global
	s.mu.RUnlock()
	q := lastUserMessage(req.Messages)
	turn := userTurns(req.Messages)
	for _, sc := range []*Scenario{own, global} {
		if sc == nil {
			continue
		}
		for i := range sc.Rules {
			if r := &sc.Rules[i]; r.matches(app, q, turn) {
				return r
			}
		}
	}
	return nil
}

func (r *ScenarioRule) matches(app scenarioApp, q string, turn int) bool {
	switch {
	case r.App != "" && r.App != app.id && r.App != app.name:
		return false
	case r.Query != "" && !strings.Contains(strings.ToLower(q), strings.ToLower(r.Query)):
		return false
	case r.re != nil && !r.re.MatchString(q):
		return false
	case r.Turn != 0 && r.Turn != turn:
		return false
	}
	return true
}

type scenarioApp struct{ id, name string }

type scenarioAppKey struct{}

// WithApp marks ctx as a call made for one app, which scenario rules with an
// app match on.
func WithApp(ctx context.Context, id, name string) context.Context {
	return context.WithValue(ctx, scenarioAppKey{}, scenarioApp{id, name})
}

func scenarioAppOf(ctx context.Context) scenarioApp {
	a, _ := ctx.Value(scenarioAppKey{}).(scenarioApp)
	return a
}

func lastUserMessage(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

func userTurns(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == "user" {
			n++
		}
	}
	return n
}

// observed returns what the last tool answered, if a tool answered after the
// last question.
func observed(msgs []Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].Role {
		case "tool":
			return msgs[i].Content, true
		case "user":
			return "", false
		}
	}
	return "", false
}

func scriptedArguments(v any) (string, error) {
	switch a := v.(type) {
	case nil:
		return "{}", nil
	case string:
		if !json.Valid([]byte(a)) {
			return "", fmt.Errorf("arguments text is not JSON: %q", a)
		}
		return a, nil
	default:
		b, err := json.Marshal(a)
		return string(b), err
	}
}

// scenarioChat is the built-in chat model under a scenario.
type scenarioChat struct {
	builtin   *builtinChat
	scenarios *Scenarios
	provider  string
}

// step is what a matched rule makes of one call.
type step struct {
	calls  []ToolCall
	text   string
	chunks []string
	delay  time.Duration
	fail   string
	usage  *ScenarioUsage
}

func (m *scenarioChat) plan(ctx context.Context, req ChatRequest) (*step, bool) {
	r := m.scenarios.match(ctx, req)
	if r == nil {
		return nil, false
	}
	st := &step{delay: r.ChunkDelay, fail: r.Fail, usage: r.Usage}
	obs, answered := observed(req.Messages)
	if len(r.ToolCalls) > 0 && !answered {
		for i, tc := range r.ToolCalls {
			args, _ := scriptedArguments(tc.Arguments)
			st.calls = append(st.calls, ToolCall{ID: fmt.Sprintf("call_%d_%d", userTurns(req.Messages), i+1), Name: tc.Name, Arguments: args})
		}
		return st, true
	}
	text := r.Answer
	if r.Chunks != nil {
		text = strings.Join(r.Chunks, "")
		st.chunks = r.Chunks
	}
	if r.Structured != nil {
		if s, ok := r.Structured.(string); ok {
			text = s
		} else {
			b, _ := json.Marshal(r.Structured)
			text = string(b)
		}
		st.chunks = nil
	}
	text = strings.ReplaceAll(text, "{{observation}}", obs)
	if r.Reasoning != "" {
		think := "<think>\n" + r.Reasoning + "\n</think>\n"
		text = think + text
		if st.chunks != nil {
			st.chunks = append([]string{think}, st.chunks...)
		}
	}
	if st.chunks == nil && text != "" {
		st.chunks = wordChunks(text)
	}
	st.text = text
	return st, true
}

// failure is the error a real provider's failure of that kind comes back
// as: the scripted status goes through the same mapping as a remote answer.
func (m *scenarioChat) failure(ctx context.Context, kind string) error {
	c := &remoteClient{name: m.provider}
	res := func(status int, body string) *http.Response {
		return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body))}
	}
	switch kind {
	case "rate_limit":
		return c.fail(ctx, res(429, `{"error":{"message":"Rate limit reached for requests","type":"requests"}}`), errors.New("429 Too Many Requests"), m.builtin.model)
	case "quota":
		return c.fail(ctx, res(429, `{"error":{"message":"insufficient_quota: you exceeded your current quota"}}`), errors.New("429 Too Many Requests"), m.builtin.model)
	case "unauthorized":
		return c.fail(ctx, res(401, `{"error":{"message":"Incorrect API key provided"}}`), errors.New("401 Unauthorized"), m.builtin.model)
	case "timeout":
		return c.fail(ctx, nil, context.DeadlineExceeded, m.builtin.model)
	case "malformed":
		return c.fail(ctx, nil, errors.New("the answer is not valid JSON"), m.builtin.model)
	default: // server_error
		return c.fail(ctx, res(500, `{"error":{"message":"The server had an error while processing your request"}}`), errors.New("500 Internal Server Error"), m.builtin.model)
	}
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return cancelled(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return cancelled(ctx)
	case <-t.C:
		return nil
	}
}

func (m *scenarioChat) finish(req ChatRequest, st *step, start time.Time) *ChatResponse {
	resp := m.builtin.respond(req, st.text, start)
	if len(st.calls) > 0 {
		resp.ToolCalls = st.calls
		resp.FinishReason = "tool_calls"
		args := ""
		for _, c := range st.calls {
			args += c.Name + c.Arguments
		}
		resp.Usage = makeUsage(m.builtin.price, CountMessages(req.Messages), CountTokens(args), time.Since(start))
	}
	if st.usage != nil {
		resp.Usage = makeUsage(m.builtin.price, st.usage.PromptTokens, st.usage.CompletionTokens, time.Since(start))
	}
	return resp
}

func (m *scenarioChat) Chat(ctx context.Context, req ChatRequest) (*ChatResponse, error) {
	st, ok := m.plan(ctx, req)
	if !ok {
		return m.builtin.Chat(ctx, req)
	}
	start := time.Now()
	if err := wait(ctx, st.delay); err != nil {
		return nil, err
	}
	if st.fail != "" {
		return nil, m.failure(ctx, st.fail)
	}
	return m.finish(req, st, start), nil
}

func (m *scenarioChat) Stream(ctx context.Context, req ChatRequest, onChunk func(Chunk) error) (*ChatResponse, error) {
	st, ok := m.plan(ctx, req)
	if !ok {
		return m.builtin.Stream(ctx, req, onChunk)
	}
	start := time.Now()
	onChunk = orDiscard(onChunk)
	if len(st.calls) > 0 {
		if err := wait(ctx, st.delay); err != nil {
			return nil, err
		}
		if st.fail != "" {
			return nil, m.failure(ctx, st.fail)
		}
		if err := onChunk(Chunk{ToolCalls: st.calls}); err != nil {
			return nil, err
		}
		return m.finish(req, st, start), nil
	}
	for _, piece := range st.chunks {
		if err := wait(ctx, st.delay); err != nil {
			return nil, err
		}
		if err := onChunk(Chunk{Delta: piece}); err != nil {
			return nil, err
		}
	}
	if st.fail != "" {
		if len(st.chunks) == 0 {
			if err := wait(ctx, st.delay); err != nil {
				return nil, err
			}
		}
		return nil, m.failure(ctx, st.fail)
	}
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	return m.finish(req, st, start), nil
}
