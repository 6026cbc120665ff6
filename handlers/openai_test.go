package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"

	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// recModel is a chat model that answers with fixed chunks and records
// every request it gets.
type recModel struct {
	chunks []string
	finish string
	failAt int // >= 0: fail instead of sending that chunk

	mu   sync.Mutex
	reqs []llm.ChatRequest
}

func newRecModel(chunks ...string) *recModel {
	return &recModel{chunks: chunks, finish: "stop", failAt: -1}
}

func (m *recModel) record(req llm.ChatRequest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
}

func (m *recModel) response() *llm.ChatResponse {
	return &llm.ChatResponse{Content: strings.Join(m.chunks, ""), FinishReason: m.finish,
		Usage: llm.Usage{PromptTokens: 11, CompletionTokens: 4, TotalTokens: 15}}
}

func (m *recModel) Chat(_ context.Context, req llm.ChatRequest) (*llm.ChatResponse, error) {
	m.record(req)
	return m.response(), nil
}

func (m *recModel) Stream(ctx context.Context, req llm.ChatRequest, onChunk func(llm.Chunk) error) (*llm.ChatResponse, error) {
	m.record(req)
	for i, c := range m.chunks {
		if i == m.failAt {
			return nil, apperr.New(400, apperr.CodeCompletionRequestError, "the fake model failed")
		}
		if onChunk == nil {
			continue
		}
		if err := onChunk(llm.Chunk{Delta: c}); err != nil {
			return nil, err
		}
	}
	return m.response(), nil
}

// sent is the longest request whose last message is query, or else that
// mentions it (conversation naming sends shorter requests of its own).
func (m *recModel) sent(t *testing.T, query string) llm.ChatRequest {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var best *llm.ChatRequest
	for i, r := range m.reqs {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Content == query && (best == nil || n > len(best.Messages)) {
			best = &m.reqs[i]
		}
	}
	if best != nil {
		return *best
	}
	for _, r := range m.reqs {
		for _, msg := range r.Messages {
			if strings.Contains(msg.Content, query) {
				return r
			}
		}
	}
	t.Fatalf("no model request carried %q (%d requests)", query, len(m.reqs))
	return llm.ChatRequest{}
}

type recModels struct{ m *recModel }

func (f recModels) Chat(string, string) (llm.ChatModel, error) { return f.m, nil }
func (f recModels) Backend(string) (string, error)             { return "fake", nil }

// Apps of the OpenAI tests besides those of every chatServer.
const (
	appTopic   = "topic"   // a workflow: start(topic) → template → end
	appGreeter = "greeter" // greeterGraph: its llm node streams into the end node
)

const topicWorkflow = `    nodes:
    - id: start
      data: {type: start, title: Start, variables: [
        {variable: topic, label: Topic, type: text-input, required: true, max_length: 200},
        {variable: style, label: Style, type: select, options: [plain, loud], required: false}]}
    - id: write
      data: {type: template-transform, title: Write, template: 'Notes on {{ topic }} ({{ style }})',
        variables: [{variable: topic, value_selector: [start, topic]}, {variable: style, value_selector: [start, style]}]}
    - id: end
      data: {type: end, title: End, outputs: [{variable: text, value_selector: [write, output]}]}
    edges:
    - {source: start, sourceHandle: source, target: write}
    - {source: write, sourceHandle: source, target: end}
`

func newOpenAIServer(t *testing.T, m *recModel) *chatServer {
	t.Helper()
	return newChatServer(t, chatOptions{models: recModels{m}, extra: map[string]string{
		appTopic:   workflowApp("Topic", topicWorkflow),
		appGreeter: workflowApp("Greeter", greeterGraph),
		appCounter: counterChatflow,
	}})
}

// oaiPost sends a blocking request and checks it against openapi.yaml.
func (s *chatServer) oaiPost(t *testing.T, app, body string) *httptest.ResponseRecorder {
	t.Helper()
	return s.do(t, request{method: "POST", path: "/v1/chat/completions", key: s.keys[app], body: body})
}

// oaiError checks an error answer: status and OpenAI's shape with the
// wanted type and code.
func oaiError(t *testing.T, rec *httptest.ResponseRecorder, status int, typ, code string) string {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status = %d, want %d; body %s", rec.Code, status, truncate(rec.Body.String()))
	}
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("error body is not JSON: %s", rec.Body)
	}
	if body.Error.Message == "" || body.Error.Type != typ || body.Error.Code == nil || *body.Error.Code != code {
		t.Errorf("error = %s, want type %q code %q", rec.Body, typ, code)
	}
	return body.Error.Message
}

// oaiStream sends a streaming request, validates the response head
// against openapi.yaml and every data frame against the chunk (or
// error) schema, and returns the frames before [DONE] and whether [DONE]
// came last.
func (s *chatServer) oaiStream(t *testing.T, app, body string) ([]map[string]any, bool) {
	t.Helper()
	r := request{method: "POST", path: "/v1/chat/completions", key: s.keys[app], body: body}
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, r.build())
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q: %s", rec.Code, rec.Header().Get("Content-Type"), truncate(rec.Body.String()))
	}
	doc, router, _ := loadContract(t)
	req := r.build()
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatal(err)
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: rec.Code, Header: rec.Header(), Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	input.SetBodyBytes(rec.Body.Bytes())
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		t.Errorf("stream does not match openapi.yaml: %v", err)
	}
	text := rec.Body.String()
	if !strings.HasSuffix(text, "\n\n") {
		t.Errorf("stream does not end with a blank line: %q", tail(text))
	}
	var frames []map[string]any
	done := false
	for _, raw := range strings.Split(strings.TrimSuffix(text, "\n\n"), "\n\n") {
		if strings.HasPrefix(raw, ":") {
			continue // keep-alive comment
		}
		payload, ok := strings.CutPrefix(raw, "data: ")
		if !ok || strings.Contains(payload, "\n") {
			t.Fatalf("frame is not one data line: %q", raw)
		}
		if done {
			t.Errorf("frame after [DONE]: %q", raw)
		}
		if payload == "[DONE]" {
			done = true
			continue
		}
		var f map[string]any
		if err := json.Unmarshal([]byte(payload), &f); err != nil {
			t.Fatalf("frame is not JSON: %q", payload)
		}
		schema := "OpenAIChatCompletionChunk"
		if _, isErr := f["error"]; isErr {
			schema = "OpenAIError"
		}
		if err := doc.Components.Schemas[schema].Value.VisitJSON(f); err != nil {
			t.Errorf("frame does not match %s: %v: %s", schema, err, payload)
		}
		frames = append(frames, f)
	}
	return frames, done
}

// chunkParts reads a stream's chunks: the text they add up to, the
// finish reason, and the usage chunk (nil when there is none). It checks
// the order: role first, text, one finish chunk, then at most the usage
// chunk; every chunk has the same id and the echoed model.
func chunkParts(t *testing.T, frames []map[string]any, model string) (string, string, map[string]any) {
	t.Helper()
	if len(frames) < 2 {
		t.Fatalf("only %d chunks", len(frames))
	}
	var text strings.Builder
	finish := ""
	var usage map[string]any
	id := frames[0]["id"]
	for i, f := range frames {
		if f["id"] != id || f["model"] != model || f["object"] != "chat.completion.chunk" {
			t.Errorf("chunk %d: id %v model %v object %v", i, f["id"], f["model"], f["object"])
		}
		choices := f["choices"].([]any)
		if len(choices) == 0 {
			if usage != nil || finish == "" || i != len(frames)-1 {
				t.Errorf("usage chunk %d out of place", i)
			}
			usage, _ = f["usage"].(map[string]any)
			continue
		}
		if f["usage"] != nil {
			t.Errorf("chunk %d carries usage %v", i, f["usage"])
		}
		c := choices[0].(map[string]any)
		delta := c["delta"].(map[string]any)
		if role, ok := delta["role"]; ok != (i == 0) || (ok && role != "assistant") {
			t.Errorf("chunk %d: role %v", i, delta["role"])
		}
		if finish != "" {
			t.Errorf("chunk %d after the finish chunk", i)
		}
		if r, ok := c["finish_reason"].(string); ok {
			finish = r
			if _, has := delta["content"]; has {
				t.Errorf("finish chunk carries text")
			}
		}
		if s, ok := delta["content"].(string); ok {
			text.WriteString(s)
		}
	}
	if finish == "" {
		t.Error("no finish chunk")
	}
	return text.String(), finish, usage
}

func TestOpenAIChatBlockingMapsHistoryInstructionsAndParams(t *testing.T) {
	m := newRecModel("Paris ", "is lovely.")
	s := newOpenAIServer(t, m)
	rec := s.oaiPost(t, appDemoChat, `{"model":"my-app","user":"ada",
		"messages":[
			{"role":"system","content":"Answer in French."},
			{"role":"user","content":"Hi"},
			{"role":"assistant","content":"Hello! How can I help?"},
			{"role":"user","content":[{"type":"text","text":"Tell me"},{"type":"text","text":"about Paris"}]}],
		"temperature":0.3,"top_p":0.9,"max_tokens":50,"max_completion_tokens":70,"stop":"END","presence_penalty":0.1}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	body := decode(t, rec)
	if body["object"] != "chat.completion" || body["model"] != "my-app" || !strings.HasPrefix(body["id"].(string), "chatcmpl-") {
		t.Errorf("envelope: %s", rec.Body)
	}
	choice := body["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	if msg["role"] != "assistant" || msg["content"] != "Paris is lovely." || choice["finish_reason"] != "stop" {
		t.Errorf("choice: %v", choice)
	}
	usage := body["usage"].(map[string]any)
	if usage["prompt_tokens"] != 11.0 || usage["completion_tokens"] != 4.0 || usage["total_tokens"] != 15.0 {
		t.Errorf("usage: %v", usage)
	}

	sent := m.sent(t, "Tell me\nabout Paris")
	var roles []string
	for _, msg := range sent.Messages {
		roles = append(roles, msg.Role)
	}
	if want := []string{"system", "user", "assistant", "user"}; !reflect.DeepEqual(roles, want) {
		t.Fatalf("roles sent = %v, want %v: %+v", roles, want, sent.Messages)
	}
	if sys := sent.Messages[0].Content; !strings.HasSuffix(sys, "Answer in French.") {
		t.Errorf("instructions not added to the system prompt: %q", sys)
	}
	if sent.Messages[1].Content != "Hi" || sent.Messages[2].Content != "Hello! How can I help?" {
		t.Errorf("history sent: %+v", sent.Messages[1:3])
	}
	for k, want := range map[string]any{"temperature": 0.3, "top_p": 0.9, "max_tokens": 70, "stop": []string{"END"}} {
		if got := sent.Params[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("param %s = %#v, want %#v", k, got, want)
		}
	}

	// The turn is stored for the request's user, but the client's history
	// is not.
	conv, _ := body["conversation_id"].(string)
	var stored []models.Message
	if err := s.db.Where("conversation_id = ?", conv).Find(&stored).Error; err != nil || len(stored) != 1 {
		t.Fatalf("stored messages of %q: %d, %v", conv, len(stored), err)
	}
	if stored[0].Query != "Tell me\nabout Paris" || stored[0].Answer != "Paris is lovely." {
		t.Errorf("stored: %q → %q", stored[0].Query, stored[0].Answer)
	}
}

func TestOpenAIConversationIDContinuesStoredHistory(t *testing.T) {
	m := newRecModel("Noted.")
	s := newOpenAIServer(t, m)
	first := decode(t, s.oaiPost(t, appDemoChat, `{"model":"x","user":"bob","messages":[{"role":"user","content":"My name is Bob"}]}`))
	conv := first["conversation_id"].(string)
	rec := s.oaiPost(t, appDemoChat, `{"model":"x","user":"bob","conversation_id":"`+conv+`",
		"messages":[{"role":"user","content":"ignored earlier"},{"role":"assistant","content":"ignored"},{"role":"user","content":"What is my name?"}]}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	sent := m.sent(t, "What is my name?")
	var contents []string
	for _, msg := range sent.Messages[1:] {
		contents = append(contents, msg.Content)
	}
	if want := []string{"My name is Bob", "Noted.", "What is my name?"}; !reflect.DeepEqual(contents, want) {
		t.Errorf("with conversation_id the stored history is used: %q", contents)
	}
	// Another user cannot continue it.
	rec = s.oaiPost(t, appDemoChat, `{"model":"x","user":"eve","conversation_id":"`+conv+`","messages":[{"role":"user","content":"hi"}]}`)
	oaiError(t, rec, 404, "invalid_request_error", "not_found")
}

func TestOpenAIChatStreaming(t *testing.T) {
	m := newRecModel("One ", "two ", "three.")
	s := newOpenAIServer(t, m)
	for _, tc := range []struct {
		name, extra string
		usage       bool
	}{
		{name: "plain"},
		{name: "with usage", extra: `,"stream_options":{"include_usage":true}`, usage: true},
		{name: "usage off", extra: `,"stream_options":{"include_usage":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames, done := s.oaiStream(t, appDemoChat, `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Count"}]`+tc.extra+`}`)
			if !done {
				t.Error("stream does not end with [DONE]")
			}
			text, finish, usage := chunkParts(t, frames, "gpt-4o")
			if text != "One two three." || finish != "stop" {
				t.Errorf("text %q, finish %q", text, finish)
			}
			if (usage != nil) != tc.usage {
				t.Fatalf("usage chunk = %v, want one: %v", usage, tc.usage)
			}
			if tc.usage && (usage["prompt_tokens"] != 11.0 || usage["completion_tokens"] != 4.0 || usage["total_tokens"] != 15.0) {
				t.Errorf("usage %v", usage)
			}
			if len(frames) < 5 {
				t.Errorf("want role, three text chunks and finish; got %d chunks", len(frames))
			}
		})
	}
}

func TestOpenAIFinishReasonLength(t *testing.T) {
	m := newRecModel("cut")
	m.finish = "length"
	s := newOpenAIServer(t, m)
	body := decode(t, s.oaiPost(t, appDemoChat, `{"model":"x","max_tokens":1,"messages":[{"role":"user","content":"long"}]}`))
	if r := body["choices"].([]any)[0].(map[string]any)["finish_reason"]; r != "length" {
		t.Errorf("finish_reason = %v", r)
	}
	frames, _ := s.oaiStream(t, appDemoChat, `{"model":"x","stream":true,"messages":[{"role":"user","content":"long"}]}`)
	if _, finish, _ := chunkParts(t, frames, "x"); finish != "length" {
		t.Errorf("streamed finish_reason = %q", finish)
	}
}

func TestOpenAIAgentAppAnswersBlocking(t *testing.T) {
	// The DSL 0.7 agent has no tools, so the model answers in one round.
	m := newRecModel("Found ", "it.")
	s := newOpenAIServer(t, m)
	rec := s.oaiPost(t, appAgent07, `{"model":"agent","inputs":{"team":"design"},"messages":[{"role":"user","content":"Search"}]}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	body := decode(t, rec)
	if c := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; c != "Found it." {
		t.Errorf("content = %q (agent thoughts must not be part of it)", c)
	}
	frames, done := s.oaiStream(t, appAgent07, `{"model":"agent","stream":true,"inputs":{"team":"design"},"messages":[{"role":"user","content":"Search"}]}`)
	if text, _, _ := chunkParts(t, frames, "agent"); text != "Found it." || !done {
		t.Errorf("streamed %q, done %v", text, done)
	}
}

func TestOpenAICompletionAppFillsParagraphInput(t *testing.T) {
	m := newRecModel("A bright lamp.")
	s := newOpenAIServer(t, m)
	rec := s.oaiPost(t, appCopywriter, `{"model":"copy","inputs":{"product":"Lamp","tone":"formal"},
		"messages":[{"role":"user","content":"Weighs 300 g"}]}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if c := decode(t, rec)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; c != "A bright lamp." {
		t.Errorf("content %q", c)
	}
	sent := m.sent(t, "Facts: Weighs 300 g")
	last := sent.Messages[len(sent.Messages)-1].Content
	if !strings.Contains(last, "formal description of Lamp") || strings.Count(last, "Weighs 300 g") != 1 {
		t.Errorf("prompt %q", last)
	}
	// The app's required inputs still apply.
	rec = s.oaiPost(t, appCopywriter, `{"model":"copy","messages":[{"role":"user","content":"x"}]}`)
	oaiError(t, rec, 400, "invalid_request_error", "invalid_param")
}

func TestOpenAIWorkflowApp(t *testing.T) {
	s := newOpenAIServer(t, newRecModel("unused"))
	rec := s.oaiPost(t, appTopic, `{"model":"wf","messages":[{"role":"user","content":"owls"}],"inputs":{"style":"loud"}}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	body := decode(t, rec)
	if c := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; c != "Notes on owls (loud)" {
		t.Errorf("content %q", c)
	}
	if _, ok := body["conversation_id"]; ok {
		t.Error("a workflow answer has no conversation")
	}
	// Inputs given in the request win over the message.
	body = decode(t, s.oaiPost(t, appTopic, `{"model":"wf","messages":[{"role":"user","content":"owls"}],"inputs":{"topic":"bats"}}`))
	if c := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; !strings.HasPrefix(c.(string), "Notes on bats") {
		t.Errorf("content %q", c)
	}
	frames, done := s.oaiStream(t, appTopic, `{"model":"wf","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"owls"}]}`)
	text, finish, usage := chunkParts(t, frames, "wf")
	if text != "Notes on owls ()" || finish != "stop" || usage == nil || !done {
		t.Errorf("streamed %q, finish %q, usage %v, done %v", text, finish, usage, done)
	}
	var app models.App
	if err := s.db.Where("name = ?", "Topic").Take(&app).Error; err != nil {
		t.Fatal(err)
	}
	var runs int64
	s.db.Model(&models.WorkflowRun{}).Where("app_id = ?", app.ID).Count(&runs)
	if runs != 3 {
		t.Errorf("%d runs recorded, want 3", runs)
	}
}

func TestOpenAIChatflowApp(t *testing.T) {
	m := newRecModel("Hi there.")
	s := newOpenAIServer(t, m)
	rec := s.oaiPost(t, appCounter, `{"model":"flow","messages":[
		{"role":"user","content":"I am Ann"},{"role":"assistant","content":"Hello Ann"},{"role":"user","content":"Who am I?"}]}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	body := decode(t, rec)
	if c := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; c != "Turn 1 (dialogue 1): Hi there." {
		t.Errorf("content %q", c)
	}
	// The LLM node's memory is the client's history.
	sent := m.sent(t, "Who am I?")
	var contents []string
	for _, msg := range sent.Messages {
		if msg.Role != "system" {
			contents = append(contents, msg.Content)
		}
	}
	if want := []string{"I am Ann", "Hello Ann", "Who am I?"}; !reflect.DeepEqual(contents, want) {
		t.Errorf("node saw %q, want %q", contents, want)
	}
	frames, done := s.oaiStream(t, appCounter, `{"model":"flow","stream":true,"messages":[{"role":"user","content":"Again"}]}`)
	if text, _, _ := chunkParts(t, frames, "flow"); text != "Turn 1 (dialogue 1): Hi there." || !done {
		t.Errorf("streamed %q, done %v", text, done)
	}
}

func TestOpenAIErrors(t *testing.T) {
	m := newRecModel("a", "b", "c")
	s := newOpenAIServer(t, m)
	key := s.keys[appDemoChat]
	for _, tc := range []struct {
		name        string
		key, body   string
		status      int
		typ, code   string
		messageHas  string
		noValidator bool
	}{
		{name: "no key", body: `{"model":"x","messages":[{"role":"user","content":"hi"}]}`, status: 401, typ: "authentication_error", code: "invalid_api_key"},
		{name: "wrong key", key: "app-nope", body: `{"model":"x","messages":[{"role":"user","content":"hi"}]}`, status: 401, typ: "authentication_error", code: "invalid_api_key"},
		{name: "no messages", key: key, body: `{"model":"x"}`, status: 400, typ: "invalid_request_error", code: "invalid_param", messageHas: "messages"},
		{name: "bad role", key: key, body: `{"model":"x","messages":[{"role":"robot","content":"hi"}]}`, status: 400, typ: "invalid_request_error", code: "invalid_param"},
		{name: "no user message", key: key, body: `{"model":"x","messages":[{"role":"system","content":"be nice"}]}`, status: 400, typ: "invalid_request_error", code: "invalid_param", messageHas: "user message"},
		{name: "assistant last", key: key, body: `{"model":"x","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`, status: 400, typ: "invalid_request_error", code: "invalid_param"},
		{name: "n above one", key: key, body: `{"model":"x","n":2,"messages":[{"role":"user","content":"hi"}]}`, status: 400, typ: "invalid_request_error", code: "invalid_param"},
		{name: "temperature out of range", key: key, body: `{"model":"x","temperature":3,"messages":[{"role":"user","content":"hi"}]}`, status: 400, typ: "invalid_request_error", code: "invalid_param"},
		{name: "data url image", key: key, body: `{"model":"x","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, status: 400, typ: "invalid_request_error", code: "invalid_param"},
		{name: "unknown conversation", key: key, body: `{"model":"x","conversation_id":"4f1c1a0e-0000-4000-8000-000000000000","messages":[{"role":"user","content":"hi"}]}`, status: 404, typ: "invalid_request_error", code: "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, request{method: "POST", path: "/v1/chat/completions", key: tc.key, body: tc.body})
			msg := oaiError(t, rec, tc.status, tc.typ, tc.code)
			if !strings.Contains(msg, tc.messageHas) {
				t.Errorf("message %q lacks %q", msg, tc.messageHas)
			}
		})
	}

	// A failure after the stream began is an error frame, with no [DONE].
	m.failAt = 1
	frames, done := s.oaiStream(t, appDemoChat, `{"model":"x","stream":true,"messages":[{"role":"user","content":"fail"}]}`)
	if done {
		t.Error("[DONE] after an error")
	}
	last := frames[len(frames)-1]
	e, ok := last["error"].(map[string]any)
	if !ok || e["code"] != apperr.CodeCompletionRequestError || e["type"] != "invalid_request_error" {
		t.Errorf("last frame %v", last)
	}
	// A failure before the stream began is a plain error.
	rec := s.do(t, request{method: "POST", path: "/v1/chat/completions", key: s.keys[appCopywriter],
		body: `{"model":"x","stream":true,"messages":[{"role":"user","content":"x"}]}`})
	oaiError(t, rec, 400, "invalid_request_error", "invalid_param")

	// Other operations keep appkb's own error shape.
	rec = s.do(t, request{method: "POST", path: "/v1/chat-messages", body: `{}`})
	expectStatus(t, rec, 401, "unauthorized")
}

func TestOpenAIModels(t *testing.T) {
	s := newOpenAIServer(t, newRecModel("x"))
	var app models.App
	if err := s.db.Where("mode = ? AND name = ?", "workflow", "Topic").Take(&app).Error; err != nil {
		t.Fatal(err)
	}
	key := s.keys[appTopic]
	rec := s.do(t, request{method: "GET", path: "/v1/models", key: key})
	list := decode(t, rec)
	data := list["data"].([]any)
	if rec.Code != 200 || list["object"] != "list" || len(data) != 1 {
		t.Fatalf("list: %d %s", rec.Code, rec.Body)
	}
	model := data[0].(map[string]any)
	if model["id"] != app.ID || model["object"] != "model" || model["owned_by"] != "appkb" || model["created"] != float64(app.CreatedAt.Unix()) {
		t.Errorf("model %v", model)
	}
	for _, name := range []string{app.ID, "Topic"} {
		rec := s.do(t, request{method: "GET", path: "/v1/models/" + name, key: key})
		if rec.Code != 200 || decode(t, rec)["id"] != app.ID {
			t.Errorf("GET /v1/models/%s: %d %s", name, rec.Code, rec.Body)
		}
	}
	rec = s.do(t, request{method: "GET", path: "/v1/models/gpt-4o", key: key})
	oaiError(t, rec, 404, "invalid_request_error", "model_not_found")
	// Another app's id is not this key's model.
	rec = s.do(t, request{method: "GET", path: "/v1/models/" + app.ID, key: s.keys[appDemoChat]})
	oaiError(t, rec, 404, "invalid_request_error", "model_not_found")
	rec = s.do(t, request{method: "GET", path: "/v1/models"})
	oaiError(t, rec, 401, "authentication_error", "invalid_api_key")
}

func TestOpenAIClientDisconnectStopsTheModel(t *testing.T) {
	model := newFakeModel(20*time.Millisecond, strings.SplitAfter(strings.Repeat("tick ", 200), " ")...)
	s := newChatServer(t, chatOptions{models: fakeModels{model}})
	srv := httptest.NewServer(s.e)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"x","stream":true,"messages":[{"role":"user","content":"go"}]}`))
	req.Header.Set("Authorization", "Bearer "+s.keys[appDemoChat])
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(res.Body)
	for seen := 0; seen < 2; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			seen++
		}
	}
	cancel()
	res.Body.Close()
	if err := <-model.ended; err == nil {
		t.Error("the model ran to the end although the client went away")
	}
}

func TestOpenAIWorkflowStreamsItsLLMText(t *testing.T) {
	s := newOpenAIServer(t, newRecModel("Hello ", "there, ", "ANN."))
	body := decode(t, s.oaiPost(t, appGreeter, `{"model":"g","messages":[{"role":"user","content":"ann"}]}`))
	blocking := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
	if blocking != "Hello there, ANN." {
		t.Errorf("blocking content %q", blocking)
	}
	frames, done := s.oaiStream(t, appGreeter, `{"model":"g","stream":true,"messages":[{"role":"user","content":"ann"}]}`)
	text, _, _ := chunkParts(t, frames, "g")
	if text != blocking || !done {
		t.Errorf("streamed %q, want the blocking answer %q", text, blocking)
	}
	if len(frames) < 5 {
		t.Errorf("the llm node's pieces should stream one by one; got %d chunks", len(frames))
	}
}

func TestOpenAIKeepAlive(t *testing.T) {
	model := newFakeModel(30*time.Millisecond, "slow ", "answer")
	s := newChatServer(t, chatOptions{models: fakeModels{model}, ping: 5 * time.Millisecond})
	frames, done := s.oaiStream(t, appDemoChat, `{"model":"x","stream":true,"messages":[{"role":"user","content":"wait"}]}`)
	if text, _, _ := chunkParts(t, frames, "x"); text != "slow answer" || !done {
		t.Errorf("streamed %q, done %v", text, done)
	}
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, request{method: "POST", path: "/v1/chat/completions", key: s.keys[appDemoChat],
		body: `{"model":"x","stream":true,"messages":[{"role":"user","content":"wait"}]}`}.build())
	if !strings.Contains(rec.Body.String(), "\n\n: keep-alive\n\n") {
		t.Errorf("no keep-alive comment in a quiet stream: %s", truncate(rec.Body.String()))
	}
}

func TestOpenAICitesKnowledge(t *testing.T) {
	s := newTestServer(t)
	ds := retrieveCorpus(t, s, "handbook")
	ctx := context.Background()
	app, err := apps.NewStore(s.db).Import(ctx, []byte(strings.ReplaceAll(knowledgeChatApp, "DATASET", ds)))
	if err != nil {
		t.Fatal(err)
	}
	key, err := apikeys.NewStore(s.db).CreateAppKey(ctx, app.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	cs := &chatServer{testServer: s, keys: map[string]string{"kb": key}}
	body := decode(t, cs.oaiPost(t, "kb", `{"model":"kb","messages":[{"role":"user","content":"How fast are refunds paid back?"}]}`))
	content := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	if !strings.Contains(content, "Refunds are paid back within five days.") {
		t.Errorf("answer %q does not quote the knowledge", content)
	}
	cites, _ := body["retriever_resources"].([]any)
	if len(cites) == 0 || cites[0].(map[string]any)["dataset_id"] != ds {
		t.Errorf("retriever_resources %v", body["retriever_resources"])
	}
	frames, _ := cs.oaiStream(t, "kb", `{"model":"kb","stream":true,"messages":[{"role":"user","content":"When does the office open?"}]}`)
	var finish map[string]any
	for _, f := range frames {
		if c := f["choices"].([]any); len(c) > 0 && c[0].(map[string]any)["finish_reason"] != nil {
			finish = f
		}
	}
	if cites, _ := finish["retriever_resources"].([]any); len(cites) == 0 {
		t.Errorf("the finish chunk carries no citations: %v", finish)
	}
}

// TestOpenAIAcceptsWhatClientsSend: nulls for optional fields, fields
// appkb ignores, and tool-call messages without content.
func TestOpenAIAcceptsWhatClientsSend(t *testing.T) {
	s := newOpenAIServer(t, newRecModel("ok"))
	rec := s.oaiPost(t, appDemoChat, `{"model":"x","stop":null,"max_tokens":null,"temperature":null,"top_p":null,
		"user":null,"stream":false,"stream_options":null,"n":1,"presence_penalty":0,"frequency_penalty":0,"seed":7,
		"logprobs":false,"response_format":{"type":"text"},"tool_choice":"auto",
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
		"messages":[{"role":"user","content":"a","name":"ann"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"42"},
			{"role":"user","content":"b"}]}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
}
