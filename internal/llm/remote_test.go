package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"appkb/internal/platform/apperr"
)

const testKey = "sk-test-0123456789abcdef"

// seen is one request the fake server received.
type seen struct {
	Method, Path, Auth, ContentType string
	Body                            map[string]any
	Raw                             []byte
}

// fakeOpenAI is an in-process OpenAI-compatible server. handle answers the
// n-th request (counting from 0); every request is recorded.
type fakeOpenAI struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []seen
	handle func(w http.ResponseWriter, r *http.Request, req seen, n int)
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, req seen, n int)) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{handle: handle}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		req := seen{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Raw: raw}
		if strings.HasPrefix(req.ContentType, "application/json") {
			if err := json.Unmarshal(raw, &req.Body); err != nil {
				t.Errorf("request body is not JSON: %v", err)
			}
		}
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		f.handle(w, r, req, n)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeOpenAI) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

// registryFor builds a strict registry with one provider "acme" pointing at
// the fake server. extra is appended to the entry (indented YAML lines).
func registryFor(t *testing.T, url string, extra string) *Registry {
	t.Helper()
	doc := fmt.Sprintf(`
providers:
  - name: acme
    aliases: [langgenius/acme/acme]
    base_url: %s/v1
    api_key: %s
    timeout: 5s
    max_retries: 2
    price_unit: 1K
    currency: USD
    defaults: {chat: small, embedding: embed-1, rerank: rr-1, speech_to_text: stt-1, text_to_speech: tts-1, moderation: mod-1}
    models:
      small: {model: real-small-2024}
      real-small-2024: {input: "0.5", output: "1.5"}
      embed-1: {input: "0.1"}
%s`, url, testKey, extra)
	r, err := Parse([]byte(doc), nil, true)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return r
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// checkChatRequest asserts what every chat test sends.
func checkChatRequest(t *testing.T, req seen, wantStream bool) {
	t.Helper()
	if req.Method != http.MethodPost || req.Path != "/v1/chat/completions" {
		t.Errorf("request = %s %s, want POST /v1/chat/completions", req.Method, req.Path)
	}
	if req.Auth != "Bearer "+testKey {
		t.Errorf("Authorization = %q", req.Auth)
	}
	if got := req.Body["model"]; got != "real-small-2024" {
		t.Errorf("model = %v, want the alias target real-small-2024", got)
	}
	stream, _ := req.Body["stream"].(bool)
	if stream != wantStream {
		t.Errorf("stream = %v, want %v", req.Body["stream"], wantStream)
	}
	if wantStream {
		opts, _ := req.Body["stream_options"].(map[string]any)
		if opts["include_usage"] != true {
			t.Errorf("stream_options = %v, want include_usage true", req.Body["stream_options"])
		}
	}
	msgs, _ := req.Body["messages"].([]any)
	want := []map[string]any{
		{"role": "system", "content": "Be brief."},
		{"role": "user", "content": "What is the weather in Paris?", "name": "ann"},
		{"role": "assistant", "tool_calls": []any{map[string]any{"id": "call_0", "type": "function",
			"function": map[string]any{"name": "weather", "arguments": `{"city":"Paris"}`}}}},
		{"role": "tool", "content": "sunny", "tool_call_id": "call_0"},
	}
	if len(msgs) != len(want) {
		t.Fatalf("messages = %v", msgs)
	}
	for i, w := range want {
		if !reflect.DeepEqual(msgs[i], w) {
			t.Errorf("message %d = %v, want %v", i, msgs[i], w)
		}
	}
	tools, _ := req.Body["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("tools = %v", req.Body["tools"])
	}
	wantTool := map[string]any{"type": "function", "function": map[string]any{
		"name": "weather", "description": "Current weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	}}
	if !reflect.DeepEqual(tools[0], wantTool) {
		t.Errorf("tool = %v, want %v", tools[0], wantTool)
	}
	if req.Body["temperature"] != 0.2 || req.Body["max_tokens"] != 64.0 {
		t.Errorf("temperature/max_tokens not forwarded: %v", req.Body)
	}
	if rf, _ := req.Body["response_format"].(map[string]any); rf["type"] != "text" {
		t.Errorf("response_format = %v, want {type: text}", req.Body["response_format"])
	}
	if _, ok := req.Body["top_k"]; ok {
		t.Errorf("top_k is not in extra_params but was forwarded")
	}
}

func chatRequest() ChatRequest {
	return ChatRequest{
		Messages: []Message{
			{Role: RoleSystem, Content: "Be brief."},
			{Role: RoleUser, Content: "What is the weather in Paris?", Name: "ann"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_0", Name: "weather", Arguments: `{"city":"Paris"}`}}},
			{Role: RoleTool, Content: "sunny", ToolCallID: "call_0"},
		},
		Tools: []Tool{{Name: "weather", Description: "Current weather", Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		}}},
		Params: map[string]any{"temperature": 0.2, "max_tokens": 64, "top_k": 5, "response_format": "text", "model": "evil"},
	}
}

func TestRemoteChatBlocking(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		checkChatRequest(t, req, false)
		writeJSON(w, 200, map[string]any{
			"id": "c1", "object": "chat.completion", "created": 1, "model": "real-small-2024",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": "Let me check.",
				"tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
					"function": map[string]any{"name": "weather", "arguments": `{"city":"Lyon"}`}}},
			}}},
			"usage": map[string]any{"prompt_tokens": 1000, "completion_tokens": 2000, "total_tokens": 3000},
		})
	})
	m, err := registryFor(t, f.URL, "").Chat("Langgenius/ACME/acme", "small")
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Chat(context.Background(), chatRequest())
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "Let me check." || res.FinishReason != "tool_calls" || res.Model != "real-small-2024" {
		t.Errorf("response = %+v", res)
	}
	if want := []ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Lyon"}`}}; !reflect.DeepEqual(res.ToolCalls, want) {
		t.Errorf("tool calls = %+v, want %+v", res.ToolCalls, want)
	}
	u := res.Usage
	if u.PromptTokens != 1000 || u.CompletionTokens != 2000 || u.TotalTokens != 3000 {
		t.Errorf("usage tokens = %+v", u)
	}
	// 1000 tokens at 0.5 per 1K, 2000 at 1.5 per 1K.
	if u.PromptPrice != "0.5000000" || u.CompletionPrice != "3.0000000" || u.TotalPrice != "3.5000000" ||
		u.PromptUnitPrice != "0.5" || u.PromptPriceUnit != "0.001" || u.Currency != "USD" {
		t.Errorf("usage prices = %+v", u)
	}
	if len(f.requests()) != 1 {
		t.Errorf("%d requests, want 1", len(f.requests()))
	}
}

func TestRemoteChatCountsTokensWhenServerDoesNot(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		writeJSON(w, 200, map[string]any{"id": "c1", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "Hello there, friend."}}}})
	})
	m, err := registryFor(t, f.URL, "").Chat("acme", "")
	if err != nil {
		t.Fatal(err)
	}
	req := ChatRequest{Messages: []Message{{Role: RoleUser, Content: "Say hello."}}}
	res, err := m.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.PromptTokens != CountMessages(req.Messages) || res.Usage.CompletionTokens != CountTokens("Hello there, friend.") {
		t.Errorf("usage = %+v", res.Usage)
	}
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, data string) {
	fmt.Fprintf(w, "data: %s\n\n", data)
	w.(http.Flusher).Flush()
}

func TestRemoteChatStreaming(t *testing.T) {
	for _, withUsage := range []bool{true, false} {
		t.Run(fmt.Sprintf("usage=%v", withUsage), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
				checkChatRequest(t, req, true)
				w.Header().Set("Content-Type", "text/event-stream")
				chunk := func(delta map[string]any, finish any) string {
					b, _ := json.Marshal(map[string]any{"id": "s", "object": "chat.completion.chunk", "model": "m",
						"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
					return string(b)
				}
				sse(w, chunk(map[string]any{"role": "assistant", "content": ""}, nil))
				sse(w, chunk(map[string]any{"content": "It is "}, nil))
				sse(w, chunk(map[string]any{"content": "sunny."}, nil))
				sse(w, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_9", "type": "function",
					"function": map[string]any{"name": "weather", "arguments": `{"ci`}}}}, nil))
				sse(w, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
					"function": map[string]any{"arguments": `ty":"Nice"}`}}}}, nil))
				sse(w, chunk(map[string]any{}, "stop"))
				if withUsage {
					sse(w, `{"id":"s","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
				}
				sse(w, "[DONE]")
			})
			m, err := registryFor(t, f.URL, "").Chat("acme", "small")
			if err != nil {
				t.Fatal(err)
			}
			var chunks []Chunk
			req := chatRequest()
			res, err := m.Stream(context.Background(), req, func(c Chunk) error {
				chunks = append(chunks, c)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wantCall := []ToolCall{{ID: "call_9", Name: "weather", Arguments: `{"city":"Nice"}`}}
			wantChunks := []Chunk{{Delta: "It is "}, {Delta: "sunny."}, {ToolCalls: wantCall}}
			if !reflect.DeepEqual(chunks, wantChunks) {
				t.Errorf("chunks = %+v, want %+v", chunks, wantChunks)
			}
			if res.Content != "It is sunny." || res.FinishReason != "stop" || !reflect.DeepEqual(res.ToolCalls, wantCall) {
				t.Errorf("response = %+v", res)
			}
			wantPrompt, wantCompletion := 7, 3
			if !withUsage {
				wantPrompt = CountMessages(req.Messages)
				wantCompletion = CountTokens("It is sunny.") + CountTokens("weather") + CountTokens(`{"city":"Nice"}`)
			}
			if res.Usage.PromptTokens != wantPrompt || res.Usage.CompletionTokens != wantCompletion ||
				res.Usage.TotalTokens != wantPrompt+wantCompletion {
				t.Errorf("usage = %+v, want %d+%d", res.Usage, wantPrompt, wantCompletion)
			}
		})
	}
}

func TestRemoteStreamStopsOnCallbackError(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 3; i++ {
			sse(w, `{"id":"s","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"x"}}]}`)
		}
		sse(w, "[DONE]")
	})
	m, _ := registryFor(t, f.URL, "").Chat("acme", "")
	stop := errors.New("client went away")
	calls := 0
	_, err := m.Stream(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}, func(Chunk) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("err = %v after %d calls, want the callback's error after 1", err, calls)
	}
}

func TestRemoteEmbeddings(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		if req.Path != "/v1/embeddings" || req.Auth != "Bearer "+testKey {
			t.Errorf("request = %s %s auth %q", req.Method, req.Path, req.Auth)
		}
		if req.Body["model"] != "embed-1" || req.Body["encoding_format"] != "float" {
			t.Errorf("body = %v", req.Body)
		}
		if in, _ := req.Body["input"].([]any); !reflect.DeepEqual(in, []any{"alpha", "beta"}) {
			t.Errorf("input = %v", req.Body["input"])
		}
		// Out of order on purpose: the index decides.
		writeJSON(w, 200, map[string]any{"object": "list", "model": "embed-1",
			"data": []any{
				map[string]any{"object": "embedding", "index": 1, "embedding": []float64{0, 1}},
				map[string]any{"object": "embedding", "index": 0, "embedding": []float64{1, 0}},
			},
			"usage": map[string]any{"prompt_tokens": 2000, "total_tokens": 2000}})
	})
	e, err := registryFor(t, f.URL, "").Embedding("acme", "")
	if err != nil {
		t.Fatal(err)
	}
	vecs, usage, err := e.Embed(context.Background(), []string{"alpha", "beta"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(vecs, [][]float32{{1, 0}, {0, 1}}) {
		t.Errorf("vectors = %v", vecs)
	}
	if usage.PromptTokens != 2000 || usage.PromptPrice != "0.2000000" || usage.TotalPrice != "0.2000000" {
		t.Errorf("usage = %+v", usage)
	}
}

func TestRemoteOtherModelTypes(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		if req.Auth != "Bearer "+testKey {
			t.Errorf("%s: Authorization = %q", req.Path, req.Auth)
		}
		switch req.Path {
		case "/v1/rerank":
			if req.Body["model"] != "rr-1" || req.Body["query"] != "q" || req.Body["top_n"] != 2.0 {
				t.Errorf("rerank body = %v", req.Body)
			}
			writeJSON(w, 200, map[string]any{"results": []any{
				map[string]any{"index": 2, "relevance_score": 0.4},
				map[string]any{"index": 0, "relevance_score": 0.9},
			}})
		case "/v1/audio/transcriptions":
			if !strings.HasPrefix(req.ContentType, "multipart/form-data") ||
				!strings.Contains(string(req.Raw), "stt-1") || !strings.Contains(string(req.Raw), "RIFFdata") ||
				!strings.Contains(string(req.Raw), `filename="a.wav"`) {
				t.Errorf("transcription request = %s %q", req.ContentType, req.Raw)
			}
			writeJSON(w, 200, map[string]any{"text": "hello"})
		case "/v1/audio/speech":
			if req.Body["model"] != "tts-1" || req.Body["input"] != "Hi" || req.Body["voice"] != "nova" {
				t.Errorf("speech body = %v", req.Body)
			}
			w.Header().Set("Content-Type", "audio/mpeg")
			_, _ = w.Write([]byte("ID3mp3"))
		case "/v1/moderations":
			if req.Body["model"] != "mod-1" || req.Body["input"] != "bad words" {
				t.Errorf("moderation body = %v", req.Body)
			}
			writeJSON(w, 200, map[string]any{"id": "m", "model": "mod-1", "results": []any{map[string]any{
				"flagged": true, "categories": map[string]any{"hate": true, "violence": false, "harassment": true},
				"category_scores": map[string]any{}, "category_applied_input_types": map[string]any{},
			}}})
		default:
			http.NotFound(w, r)
		}
	})
	reg := registryFor(t, f.URL, "    voice: nova")
	ctx := context.Background()

	rr, err := reg.Rerank("acme", "")
	if err != nil {
		t.Fatal(err)
	}
	ranked, err := rr.Rerank(ctx, "q", []string{"a", "b", "c"}, 2)
	if err != nil || !reflect.DeepEqual(ranked, []RerankResult{{0, 0.9}, {2, 0.4}}) {
		t.Errorf("rerank = %v, %v", ranked, err)
	}

	stt, err := reg.SpeechToText("acme", "")
	if err != nil {
		t.Fatal(err)
	}
	if text, err := stt.Transcribe(ctx, strings.NewReader("RIFFdata"), "a.wav"); err != nil || text != "hello" {
		t.Errorf("transcribe = %q, %v", text, err)
	}

	tts, err := reg.TextToSpeech("acme", "")
	if err != nil {
		t.Fatal(err)
	}
	speech, err := tts.Speak(ctx, "Hi", "")
	if err != nil {
		t.Fatal(err)
	}
	audio, _ := io.ReadAll(speech.Audio)
	speech.Audio.Close()
	if string(audio) != "ID3mp3" || speech.ContentType != "audio/mpeg" {
		t.Errorf("speech = %q (%s)", audio, speech.ContentType)
	}

	mod, err := reg.Moderation("acme", "")
	if err != nil {
		t.Fatal(err)
	}
	verdict, err := mod.Moderate(ctx, "bad words")
	if err != nil || !verdict.Flagged || !reflect.DeepEqual(verdict.Categories, []string{"harassment", "hate"}) {
		t.Errorf("moderation = %+v, %v", verdict, err)
	}
}

// wantModelError asserts an *apperr.Error with status 400 and code.
func wantModelError(t *testing.T, err error, code string) *apperr.Error {
	t.Helper()
	var e *apperr.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *apperr.Error %s", err, err, code)
	}
	if e.Status != http.StatusBadRequest || e.Code != code {
		t.Fatalf("err = %d %s (%s), want 400 %s", e.Status, e.Code, e.Message, code)
	}
	if strings.Contains(e.Message, testKey) || strings.Contains(e.Message, "0123456789abcdef") {
		t.Fatalf("message leaks the key: %s", e.Message)
	}
	return e
}

func TestRemoteErrorMapping(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		header     map[string]string
		wantCode   string
		wantInMsg  string
		wantCalls  int
		embeddings bool
	}{
		{name: "401 bad key", status: 401, body: `{"error":{"message":"Incorrect API key provided: sk-test-0123456789abcdef","type":"invalid_request_error","code":"invalid_api_key"}}`,
			wantCode: apperr.CodeProviderNotInitialize, wantInMsg: "HTTP 401", wantCalls: 1},
		{name: "403 forbidden", status: 403, body: `{"error":{"message":"no access"}}`, wantCode: apperr.CodeProviderNotInitialize, wantInMsg: "HTTP 403", wantCalls: 1},
		{name: "404 unknown model", status: 404, body: `{"error":{"message":"The model does not exist","code":"model_not_found"}}`,
			wantCode: apperr.CodeModelNotSupported, wantInMsg: "real-small-2024", wantCalls: 1},
		{name: "404 on embeddings", status: 404, body: `404 page not found`, wantCode: apperr.CodeModelNotSupported, wantCalls: 1, embeddings: true},
		{name: "429 insufficient quota", status: 429, header: map[string]string{"Retry-After-Ms": "1"},
			body:     `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`,
			wantCode: apperr.CodeProviderQuotaExceeded, wantInMsg: "quota is used up", wantCalls: 3},
		{name: "429 rate limit outlasts retries", status: 429, header: map[string]string{"Retry-After-Ms": "1"},
			body: `{"error":{"message":"Rate limit reached","type":"requests"}}`, wantCode: apperr.CodeProviderQuotaExceeded, wantInMsg: "rate limiting", wantCalls: 3},
		{name: "400 keeps upstream message without secrets", status: 400,
			body:     `{"error":{"message":"max_tokens is too large; your key sk-test-0123456789abcdef and Bearer abc.def","type":"invalid_request_error"}}`,
			wantCode: apperr.CodeCompletionRequestError, wantInMsg: "HTTP 400: max_tokens is too large", wantCalls: 1},
		{name: "500 outlasts retries", status: 500, header: map[string]string{"Retry-After-Ms": "1"}, body: `{"error":{"message":"boom"}}`,
			wantCode: apperr.CodeCompletionRequestError, wantInMsg: "HTTP 500", wantCalls: 3},
		{name: "error body that is not an OpenAI error", status: 422, body: `{"error":"model 'x' not loaded"}`,
			wantCode: apperr.CodeCompletionRequestError, wantInMsg: "HTTP 422: model 'x' not loaded", wantCalls: 1},
		{name: "200 whose body is not JSON", status: 200, body: `<html>proxy login</html>`,
			wantCode: apperr.CodeCompletionRequestError, wantInMsg: "failed", wantCalls: 1},
		{name: "200 without choices", status: 200, body: `{"id":"x","choices":[]}`,
			wantCode: apperr.CodeCompletionRequestError, wantInMsg: "no answer", wantCalls: 1},
		{name: "plain text error body", status: 418, body: `I'm a teapot`, wantCode: apperr.CodeCompletionRequestError, wantInMsg: "HTTP 418: I'm a teapot", wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			reg := registryFor(t, f.URL, "")
			var err error
			if tc.embeddings {
				e, _ := reg.Embedding("acme", "")
				_, _, err = e.Embed(context.Background(), []string{"x"})
			} else {
				m, _ := reg.Chat("acme", "small")
				_, err = m.Chat(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
			}
			e := wantModelError(t, err, tc.wantCode)
			t.Logf("message: %s", e.Message)
			if !strings.Contains(e.Message, tc.wantInMsg) {
				t.Errorf("message %q does not contain %q", e.Message, tc.wantInMsg)
			}
			if strings.Contains(e.Message, "abc.def") {
				t.Errorf("message leaks a bearer token: %s", e.Message)
			}
			if got := len(f.requests()); got != tc.wantCalls {
				t.Errorf("%d requests, want %d", got, tc.wantCalls)
			}
		})
	}
}

func TestRemoteStreamingErrorMapping(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		writeJSON(w, 401, map[string]any{"error": map[string]any{"message": "bad key"}})
	})
	m, _ := registryFor(t, f.URL, "").Chat("acme", "")
	_, err := m.Stream(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}, func(Chunk) error { return nil })
	wantModelError(t, err, apperr.CodeProviderNotInitialize)
}

func TestRemoteMidStreamError(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, `{"id":"s","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"x"}}]}`)
		sse(w, `{"error":{"message":"overloaded"}}`)
	})
	m, _ := registryFor(t, f.URL, "").Chat("acme", "")
	_, err := m.Stream(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}, func(Chunk) error { return nil })
	wantModelError(t, err, apperr.CodeCompletionRequestError)
}

func TestRemoteRetriesThenSucceeds(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		if n == 0 {
			w.Header().Set("Retry-After-Ms", "1")
			writeJSON(w, 503, map[string]any{"error": map[string]any{"message": "warming up"}})
			return
		}
		writeJSON(w, 200, map[string]any{"id": "c", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "ok"}}},
			"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
	})
	m, _ := registryFor(t, f.URL, "").Chat("acme", "")
	res, err := m.Chat(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if err != nil || res.Content != "ok" {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if !reflect.DeepEqual(reqs[0].Body, reqs[1].Body) {
		t.Errorf("the retry sent another body: %v vs %v", reqs[0].Body, reqs[1].Body)
	}
}

func TestRemoteNoRetriesWhenConfigured(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		writeJSON(w, 503, map[string]any{"error": map[string]any{"message": "down"}})
	})
	doc := fmt.Sprintf("providers:\n  - {name: acme, base_url: %s, max_retries: 0, defaults: {chat: x}}\n", f.URL)
	reg, err := Parse([]byte(doc), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := reg.Chat("acme", "")
	_, err = m.Chat(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	wantModelError(t, err, apperr.CodeCompletionRequestError)
	if got := len(f.requests()); got != 1 {
		t.Errorf("%d requests, want 1", got)
	}
}

func TestRemoteCancellation(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		if req.Body["stream"] == true {
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, `{"id":"s","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"first "}}]}`)
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	m, _ := registryFor(t, f.URL, "").Chat("acme", "")
	req := ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}

	t.Run("blocking", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := m.Chat(ctx, req)
		wantModelError(t, err, apperr.CodeCompletionRequestError)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want it to wrap context.Canceled", err)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var got []string
		_, err := m.Stream(ctx, req, func(c Chunk) error {
			got = append(got, c.Delta)
			cancel() // the client leaves after the first piece
			return nil
		})
		wantModelError(t, err, apperr.CodeCompletionRequestError)
		if !errors.Is(err, context.Canceled) || !reflect.DeepEqual(got, []string{"first "}) {
			t.Errorf("err = %v, chunks = %q", err, got)
		}
	})
}

func TestRemoteTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	doc := fmt.Sprintf("providers:\n  - {name: slow, base_url: %s, timeout: 0.1, max_retries: 0, defaults: {chat: x}}\n", f.URL)
	reg, err := Parse([]byte(doc), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := reg.Chat("slow", "")
	_, err = m.Chat(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	e := wantModelError(t, err, apperr.CodeCompletionRequestError)
	if !strings.Contains(e.Message, "in time") {
		t.Errorf("message = %q", e.Message)
	}
}

func TestRemoteUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	doc := fmt.Sprintf("providers:\n  - {name: gone, base_url: 'http://%s/v1', max_retries: 0, defaults: {chat: x}}\n", addr)
	reg, err := Parse([]byte(doc), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := reg.Chat("gone", "")
	_, err = m.Chat(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	wantModelError(t, err, apperr.CodeProviderNotInitialize)
}

func TestRemoteSendsNoAmbientCredentials(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-ambient-secret-value")
	t.Setenv("OPENAI_ORG_ID", "org-ambient")
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
		if req.Auth != "" || r.Header.Get("OpenAI-Organization") != "" {
			t.Errorf("a provider without a key sent Authorization %q, organization %q", req.Auth, r.Header.Get("OpenAI-Organization"))
		}
		if r.Header.Get("X-Team") != "search" {
			t.Errorf("configured header missing: %v", r.Header)
		}
		writeJSON(w, 200, map[string]any{"id": "c", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "ok"}}}})
	})
	doc := fmt.Sprintf("providers:\n  - {name: ollama, base_url: %s/v1, headers: {X-Team: search}, defaults: {chat: llama}}\n", f.URL)
	reg, err := Parse([]byte(doc), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := reg.Chat("ollama", "")
	if _, err := m.Chat(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
}

func TestRemoteParams(t *testing.T) {
	tests := []struct {
		name   string
		extra  string
		params map[string]any
		want   map[string]any // expected top-level fields besides model/messages
	}{
		{name: "unknown params are dropped", params: map[string]any{"top_k": 3, "mirostat": 1},
			want: map[string]any{}},
		{name: "extra_params are forwarded", extra: "    extra_params: [top_k]", params: map[string]any{"top_k": 3},
			want: map[string]any{"top_k": 3.0}},
		{name: "nil values are dropped", params: map[string]any{"temperature": nil},
			want: map[string]any{}},
		{name: "reserved names never override", params: map[string]any{"model": "x", "stream": true, "n": 3},
			want: map[string]any{}},
		{name: "json_schema response format", params: map[string]any{"response_format": "json_schema", "json_schema": `{"name":"s","schema":{"type":"object"}}`},
			want: map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "s", "schema": map[string]any{"type": "object"}}}}},
		{name: "stop list", params: map[string]any{"stop": []string{"\n\n"}}, want: map[string]any{"stop": []any{"\n\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req seen, n int) {
				got := map[string]any{}
				for k, v := range req.Body {
					if k != "model" && k != "messages" {
						got[k] = v
					}
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("fields = %v, want %v", got, tc.want)
				}
				writeJSON(w, 200, map[string]any{"id": "c", "object": "chat.completion", "model": "m",
					"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "ok"}}}})
			})
			m, _ := registryFor(t, f.URL, tc.extra).Chat("acme", "")
			if _, err := m.Chat(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}, Params: tc.params}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
