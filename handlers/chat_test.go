package handlers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/chat"
	"appkb/internal/run/tools"
	"appkb/internal/wiring"
	"appkb/models"
)

// chatServer is the real server with the demo apps and a few test apps
// installed; keys holds one app key per app, by name.
type chatServer struct {
	*testServer
	keys map[string]string
}

// chatOptions tune a chatServer.
type chatOptions struct {
	ping   time.Duration
	models chat.Models
	llm    *llm.Registry
	extra  map[string]string // more apps: name → definition text
	tools  *tools.Registry
	log    io.Writer // where the server logs; discarded when nil
}

// Names of the apps every chatServer has.
const (
	appDemoChat   = "demo chat"
	appDemoWriter = "demo writer"
	appTravel     = "travel"     // testdata/apps/chat.yml: advanced prompt, suggestions on
	appCopywriter = "copywriter" // testdata/apps/completion.yml: four kinds of fields, keyword moderation
	appAgent      = "agent"      // testdata/apps/agent-chat.yml
	appChatflow   = "chatflow"   // testdata/apps/advanced-chat.yml
	appAgent07    = "agent07"    // testdata/apps/agent.yml: the DSL 0.7 agent mode
)

func newChatServer(t *testing.T, o chatOptions) *chatServer {
	t.Helper()
	_, _, specYAML := loadContract(t)
	gdb := db.OpenTemp(t)
	ctx := context.Background()
	appStore, keyStore := apps.NewStore(gdb), apikeys.NewStore(gdb)
	dk, err := demo.Ensure(ctx, appStore, keyStore)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{appDemoChat: dk.AppKey, appDemoWriter: dk.CompletionAppKey}
	files := map[string]string{
		appTravel: "../testdata/apps/chat.yml", appCopywriter: "../testdata/apps/completion.yml",
		appAgent: "../testdata/apps/agent-chat.yml", appChatflow: "../testdata/apps/advanced-chat.yml",
		appAgent07: "../testdata/apps/agent.yml",
	}
	defs := map[string][]byte{}
	for name, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defs[name] = b
	}
	for name, text := range o.extra {
		defs[name] = []byte(text)
	}
	for name, def := range defs {
		app, err := appStore.Import(ctx, def)
		if err != nil {
			t.Fatalf("import %s: %v", name, err)
		}
		if keys[name], err = keyStore.CreateAppKey(ctx, app.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	logTo := o.log
	if logTo == nil {
		logTo = io.Discard
	}
	log := slog.New(slog.NewTextHandler(logTo, nil))
	e, err := wiring.NewServer(handlers.Deps{DB: gdb, Logger: log, SpecYAML: specYAML,
		Models: o.llm, ChatModels: o.models, PingInterval: o.ping, DataDir: t.TempDir(), Tools: o.tools})
	if err != nil {
		t.Fatal(err)
	}
	return &chatServer{testServer: &testServer{e: e, db: gdb, appID: dk.AppID, appKey: dk.AppKey}, keys: keys}
}

func (s *chatServer) post(t *testing.T, app, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	return s.do(t, request{method: "POST", path: path, key: s.keys[app], body: body})
}

// frame is one parsed event of a stream.
type frame map[string]any

func (f frame) str(k string) string { s, _ := f[k].(string); return s }

// readFrames splits an event stream into its events and checks Dify's
// framing: every frame is a `data: {json}` line or an `event: ping` line,
// each followed by a blank line. Pings are returned as {"event":"ping"}.
func readFrames(t *testing.T, body string) []frame {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Errorf("stream does not end with a blank line: %q", tail(body))
	}
	var out []frame
	for _, raw := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		if raw == "event: ping" {
			out = append(out, frame{"event": "ping"})
			continue
		}
		payload, ok := strings.CutPrefix(raw, "data: ")
		if !ok || strings.Contains(payload, "\n") {
			t.Fatalf("frame is not one data: line: %q", raw)
		}
		var f frame
		if err := json.Unmarshal([]byte(payload), &f); err != nil {
			t.Fatalf("frame is not JSON: %v: %q", err, payload)
		}
		out = append(out, f)
	}
	return out
}

func tail(s string) string {
	if len(s) > 200 {
		return s[len(s)-200:]
	}
	return s
}

// checkStream asserts what every successful stream must satisfy and returns
// the answer its message chunks add up to and its message_end event.
func checkStream(t *testing.T, frames []frame, chatApp bool) (string, frame) {
	t.Helper()
	var answer strings.Builder
	var end frame
	ends := 0
	var taskID, messageID string
	// Read-aloud audio may follow message_end (Dify sends what is left of
	// it once the answer is complete); message_end is last otherwise.
	last := len(frames) - 1
	for last > 0 && strings.HasPrefix(frames[last].str("event"), "tts_message") {
		last--
	}
	for i, f := range frames {
		ev := f.str("event")
		if ev == "ping" {
			continue
		}
		for _, k := range []string{"task_id", "message_id", "created_at"} {
			if _, ok := f[k]; !ok {
				t.Errorf("event %d (%s) has no %s", i, ev, k)
			}
		}
		if _, ok := f["conversation_id"]; ok != chatApp {
			t.Errorf("event %d (%s): conversation_id present = %v, want %v", i, ev, ok, chatApp)
		}
		if taskID == "" {
			taskID, messageID = f.str("task_id"), f.str("message_id")
		}
		if f.str("task_id") != taskID || f.str("message_id") != messageID {
			t.Errorf("event %d changes task or message id", i)
		}
		switch ev {
		case "message", "agent_message":
			answer.WriteString(f.str("answer"))
		case "message_replace":
			answer.Reset()
			answer.WriteString(f.str("answer"))
		case "message_end":
			ends++
			end = f
			if i != last {
				t.Errorf("message_end is event %d of %d, not the last", i, len(frames))
			}
		}
	}
	if ends != 1 {
		t.Fatalf("%d message_end events, want exactly one", ends)
	}
	return answer.String(), end
}

func builtinAnswer(query string) string {
	return llm.BuiltinAnswer(llm.ChatRequest{Messages: []llm.Message{{Role: llm.RoleUser, Content: query}}})
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, rec.Body)
	}
	return m
}

func storedMessage(t *testing.T, s *chatServer, id string) models.Message {
	t.Helper()
	var m models.Message
	if err := s.db.Take(&m, "id = ?", id).Error; err != nil {
		t.Fatalf("message %s: %v", id, err)
	}
	return m
}

func TestChatMessageBlocking(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	rec := s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"What is appkb good for?","inputs":{"name":"Ada"},"user":"u1"}`)
	expectStatus(t, rec, 200, "")
	body := decode(t, rec)
	if body["event"] != "message" || body["mode"] != "chat" || body["id"] != body["message_id"] {
		t.Errorf("unexpected envelope: %s", rec.Body)
	}
	if got, want := body["answer"], builtinAnswer("What is appkb good for?"); got != want {
		t.Errorf("answer = %q, want %q", got, want)
	}
	usage := body["metadata"].(map[string]any)["usage"].(map[string]any)
	if usage["prompt_tokens"].(float64) <= 0 || usage["completion_tokens"].(float64) <= 0 {
		t.Errorf("usage without tokens: %v", usage)
	}

	m := storedMessage(t, s, body["message_id"].(string))
	if m.Status != chat.StatusNormal || m.Answer != body["answer"] || m.Query != "What is appkb good for?" {
		t.Errorf("stored message: %+v", m)
	}
	if m.MessageTokens <= 0 || m.AnswerTokens <= 0 || m.TotalTokens != m.MessageTokens+m.AnswerTokens {
		t.Errorf("stored tokens: %d + %d = %d", m.MessageTokens, m.AnswerTokens, m.TotalTokens)
	}
	if m.TotalPrice != nil || m.Currency != nil {
		t.Errorf("price should be null for the builtin model: %v %v", m.TotalPrice, m.Currency)
	}
	if m.ConversationID == nil || *m.ConversationID != body["conversation_id"] || m.TaskID != body["task_id"] {
		t.Errorf("stored ids differ from the answer: %+v", m)
	}
	var conv models.Conversation
	if err := s.db.Take(&conv, "id = ?", body["conversation_id"]).Error; err != nil {
		t.Fatal(err)
	}
	if conv.Name != "What is appkb good for?" || conv.DialogueCount != 1 || conv.Introduction != "Hello! Ask me anything." {
		t.Errorf("conversation: name %q, dialogues %d, introduction %q", conv.Name, conv.DialogueCount, conv.Introduction)
	}
	if !strings.Contains(conv.Inputs, `"name":"Ada"`) {
		t.Errorf("conversation inputs: %s", conv.Inputs)
	}
}

func TestChatMessageStreaming(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	const query = "Tell me about streaming"
	rec := s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"`+query+`","inputs":{},"user":"u1","response_mode":"streaming"}`)
	expectStatus(t, rec, 200, "")
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	frames := readFrames(t, rec.Body.String())
	answer, end := checkStream(t, frames, true)
	if answer != builtinAnswer(query) {
		t.Errorf("chunks add up to %q", answer)
	}
	if len(frames) < 3 {
		t.Errorf("the builtin model should stream word by word; got %d events", len(frames))
	}
	meta := end["metadata"].(map[string]any)
	if _, ok := meta["usage"]; !ok {
		t.Error("message_end has no usage")
	}
	if rr, ok := meta["retriever_resources"].([]any); !ok || len(rr) != 0 {
		t.Errorf("retriever_resources = %v, want []", meta["retriever_resources"])
	}
	m := storedMessage(t, s, end.str("message_id"))
	if m.Answer != answer || m.Status != chat.StatusNormal || m.AnswerTokens == 0 {
		t.Errorf("stored: %+v", m)
	}
	var conv models.Conversation
	if err := s.db.Take(&conv, "id = ?", end.str("conversation_id")).Error; err != nil {
		t.Fatal(err)
	}
	if conv.DialogueCount != 1 || conv.Name != query {
		t.Errorf("conversation: %+v", conv)
	}
}

func TestResponseModeNotAccept(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.keys[appDemoChat],
		body: `{"query":"hi","inputs":{},"user":"u1"}`, header: http.Header{"Accept": {"text/event-stream"}}})
	expectStatus(t, rec, 200, "")
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("without response_mode the answer is blocking JSON; got %s", ct)
	}
}

func TestCompletionMessage(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	t.Run("blocking", func(t *testing.T) {
		rec := s.post(t, appDemoWriter, "/v1/completion-messages", `{"inputs":{"topic":"tea"},"user":"u1","response_mode":"blocking"}`)
		expectStatus(t, rec, 200, "")
		body := decode(t, rec)
		if _, ok := body["conversation_id"]; ok {
			t.Error("completion answers carry no conversation_id")
		}
		if body["mode"] != "completion" || !strings.Contains(body["answer"].(string), "Write a short note about tea in a friendly tone.") {
			t.Errorf("answer: %s", rec.Body)
		}
		m := storedMessage(t, s, body["message_id"].(string))
		if m.ConversationID != nil || !strings.Contains(m.Inputs, `"tone":"friendly"`) {
			t.Errorf("stored: conversation %v, inputs %s", m.ConversationID, m.Inputs)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		rec := s.post(t, appDemoWriter, "/v1/completion-messages", `{"inputs":{"topic":"tea","tone":"formal"},"user":"u1","response_mode":"streaming"}`)
		expectStatus(t, rec, 200, "")
		answer, end := checkStream(t, readFrames(t, rec.Body.String()), false)
		if !strings.Contains(answer, "in a formal tone") {
			t.Errorf("answer: %q", answer)
		}
		if m := storedMessage(t, s, end.str("message_id")); m.Answer != answer {
			t.Errorf("stored answer %q", m.Answer)
		}
	})
	t.Run("input moderation answers with the preset reply", func(t *testing.T) {
		rec := s.post(t, appCopywriter, "/v1/completion-messages", `{"inputs":{"product":"a replica watch","tone":"playful"},"user":"u1"}`)
		expectStatus(t, rec, 200, "")
		body := decode(t, rec)
		if body["answer"] != "I cannot write about that." {
			t.Errorf("answer = %q", body["answer"])
		}
	})
}

func TestConversationContinues(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	first := decode(t, s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"first","inputs":{"name":"Ada"},"user":"alice"}`))
	conv := first["conversation_id"].(string)

	rec := s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"second","inputs":{},"user":"alice","response_mode":"streaming","conversation_id":"`+conv+`"}`)
	expectStatus(t, rec, 200, "")
	_, end := checkStream(t, readFrames(t, rec.Body.String()), true)
	if end.str("conversation_id") != conv {
		t.Fatalf("continued in %s, want %s", end.str("conversation_id"), conv)
	}
	m1, m2 := storedMessage(t, s, first["message_id"].(string)), storedMessage(t, s, end.str("message_id"))
	if m2.MessageTokens <= m1.MessageTokens {
		t.Errorf("the second prompt (%d tokens) should include the first turn (%d tokens)", m2.MessageTokens, m1.MessageTokens)
	}
	if m2.ParentMessageID == nil || *m2.ParentMessageID != m1.ID {
		t.Errorf("parent of the second message = %v, want %s", m2.ParentMessageID, m1.ID)
	}
	if !strings.Contains(m2.Inputs, `"name":"Ada"`) {
		t.Errorf("a continued conversation keeps its inputs; got %s", m2.Inputs)
	}
	var c models.Conversation
	if err := s.db.Take(&c, "id = ?", conv).Error; err != nil {
		t.Fatal(err)
	}
	if c.DialogueCount != 2 || c.Name != "first" {
		t.Errorf("conversation after two turns: %+v", c)
	}

	tests := []struct {
		name, app, body string
		wantStatus      int
		wantCode        string
	}{
		{"another user's conversation → 404", appDemoChat,
			`{"query":"hi","inputs":{},"user":"mallory","conversation_id":"` + conv + `"}`, 404, "not_found"},
		{"an unknown conversation → 404", appDemoChat,
			`{"query":"hi","inputs":{},"user":"alice","conversation_id":"5f0c3e52-8b6f-4bd0-9d0a-0c7b1f4e2a10"}`, 404, "not_found"},
		{"a conversation id that is no uuid → 404", appDemoChat,
			`{"query":"hi","inputs":{},"user":"alice","conversation_id":"nope"}`, 404, "not_found"},
		{"the conversation of another app → 404", appTravel,
			`{"query":"hi","inputs":{"traveller":"solo"},"user":"alice","conversation_id":"` + conv + `"}`, 404, "not_found"},
		{"an empty conversation id starts a new one", appDemoChat,
			`{"query":"hi","inputs":{},"user":"alice","conversation_id":""}`, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.post(t, tc.app, "/v1/chat-messages", tc.body)
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
			if tc.wantStatus == 200 && decode(t, rec)["conversation_id"] == conv {
				t.Error("an empty conversation_id continued the old conversation")
			}
		})
	}
}

func TestChatAndCompletionErrors(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	tests := []struct {
		name, app, path, body string
		wantStatus            int
		wantCode              string
		wantInMessage         string
	}{
		{"required input missing", appDemoWriter, "/v1/completion-messages", `{"inputs":{},"user":"u1"}`, 400, "invalid_param", "topic"},
		{"input too long", appDemoChat, "/v1/chat-messages", `{"query":"hi","inputs":{"name":"` + strings.Repeat("x", 49) + `"},"user":"u1"}`, 400, "invalid_param", "name"},
		{"select value not offered", appDemoWriter, "/v1/completion-messages", `{"inputs":{"topic":"tea","tone":"rude"},"user":"u1"}`, 400, "invalid_param", "tone"},
		{"number input that is not a number", appCopywriter, "/v1/completion-messages", `{"inputs":{"product":"mug","tone":"formal","words":"lots"},"user":"u1"}`, 400, "invalid_param", "words"},
		{"required select missing in a chat app", appTravel, "/v1/chat-messages", `{"query":"hi","inputs":{},"user":"u1"}`, 400, "invalid_param", "traveller"},
		{"empty user", appDemoChat, "/v1/chat-messages", `{"query":"hi","inputs":{},"user":""}`, 400, "invalid_param", "user"},
		{"chat operation on a completion app", appDemoWriter, "/v1/chat-messages", `{"query":"hi","inputs":{"topic":"x"},"user":"u1"}`, 400, "not_chat_app", ""},
		{"completion operation on a chat app", appDemoChat, "/v1/completion-messages", `{"inputs":{},"user":"u1"}`, 400, "app_unavailable", ""},
		{"blocking request to an agent app", appAgent, "/v1/chat-messages", `{"query":"hi","inputs":{},"user":"u1","response_mode":"blocking"}`, 400, "bad_request", "streaming"},
		{"agent app without response_mode (blocking)", appAgent, "/v1/chat-messages", `{"query":"hi","inputs":{},"user":"u1"}`, 400, "bad_request", ""},
		{"stop of a chat task on a completion app", appDemoWriter, "/v1/chat-messages/abc/stop", `{"user":"u1"}`, 400, "not_chat_app", ""},
		{"stop of a completion task on a chat app", appDemoChat, "/v1/completion-messages/abc/stop", `{"user":"u1"}`, 400, "app_unavailable", ""},
		{"stop of an unknown task succeeds", appDemoChat, "/v1/chat-messages/abc/stop", `{"user":"u1"}`, 200, "", ""},
		{"stop of an unknown completion task succeeds", appDemoWriter, "/v1/completion-messages/abc/stop", `{"user":"u1"}`, 200, "", ""},
		{"stop without a user", appDemoChat, "/v1/chat-messages/abc/stop", `{"user":""}`, 400, "invalid_param", "user"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.post(t, tc.app, tc.path, tc.body)
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
			if !strings.Contains(rec.Body.String(), tc.wantInMessage) {
				t.Errorf("message should mention %q: %s", tc.wantInMessage, rec.Body)
			}
		})
	}
}

func TestAgentAppStreams(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	// The DSL 0.7 agent has no tools: the model answers in one round,
	// streamed as agent_message chunks and closed by its thought.
	rec := s.post(t, appAgent07, "/v1/chat-messages", `{"query":"find me a paper","inputs":{"team":"design"},"user":"u1","response_mode":"streaming"}`)
	expectStatus(t, rec, 200, "")
	frames := readFrames(t, rec.Body.String())
	answer, end := checkStream(t, frames, true)
	if answer != builtinAnswer("find me a paper") {
		t.Errorf("answer %q", answer)
	}
	var names []string
	for _, f := range frames {
		names = append(names, f.str("event"))
	}
	if names[0] != "agent_message" || names[len(names)-2] != "agent_thought" {
		t.Errorf("event order: %v", names)
	}
	if last := frames[len(frames)-2]; last.str("thought") != answer {
		t.Errorf("the final thought should hold the answer: %v", last)
	}
	m := storedMessage(t, s, end.str("message_id"))
	if !strings.Contains(m.AgentThoughts, `"position":1`) {
		t.Errorf("agent thoughts not stored: %s", m.AgentThoughts)
	}
	for _, app := range []string{appAgent, appAgent07} {
		expectStatus(t, s.post(t, app, "/v1/chat-messages", `{"query":"hi","inputs":{"team":"design"},"user":"u1","response_mode":"blocking"}`), 400, "bad_request")
	}
}

func TestConversationNames(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	tests := []struct {
		name, body, want string
	}{
		{"the builtin model names a conversation after its first words",
			`{"query":"  Plan a   trip to Lisbon for two people in May please ","inputs":{},"user":"u1"}`, "Plan a trip to Lisbon for two people"},
		{"auto_generate_name false keeps the default name",
			`{"query":"Plan a trip","inputs":{},"user":"u1","auto_generate_name":false}`, chat.DefaultConversationName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := decode(t, s.post(t, appDemoChat, "/v1/chat-messages", tc.body))
			var conv models.Conversation
			if err := s.db.Take(&conv, "id = ?", body["conversation_id"]).Error; err != nil {
				t.Fatal(err)
			}
			if conv.Name != tc.want {
				t.Errorf("name = %q, want %q", conv.Name, tc.want)
			}
		})
	}
}

// screenedApp is the demo chat app with its answers screened for a word
// that the builtin model always says.
func screenedApp() string {
	app := strings.Replace(string(demo.ChatApp), "name: appkb demo chat", "name: screened chat", 1)
	return strings.Replace(app, "  sensitive_word_avoidance:\n    enabled: false", `  sensitive_word_avoidance:
    enabled: true
    type: keywords
    config:
      keywords: "offline"
      inputs_config: {enabled: false}
      outputs_config: {enabled: true, preset_response: "[withheld]"}`, 1)
}

func TestOutputModeration(t *testing.T) {
	s := newChatServer(t, chatOptions{extra: map[string]string{"screened": screenedApp()}})
	t.Run("streaming replaces the answer", func(t *testing.T) {
		rec := s.post(t, "screened", "/v1/chat-messages", `{"query":"hello","inputs":{},"user":"u1","response_mode":"streaming"}`)
		expectStatus(t, rec, 200, "")
		frames := readFrames(t, rec.Body.String())
		answer, end := checkStream(t, frames, true)
		if answer != "[withheld]" {
			t.Errorf("answer after replacement = %q", answer)
		}
		replaced := false
		for _, f := range frames {
			if f.str("event") == "message_replace" {
				replaced = true
			}
		}
		if !replaced {
			t.Error("no message_replace event")
		}
		if m := storedMessage(t, s, end.str("message_id")); m.Answer != "[withheld]" {
			t.Errorf("stored answer %q", m.Answer)
		}
	})
	t.Run("blocking answers with the preset", func(t *testing.T) {
		rec := s.post(t, "screened", "/v1/chat-messages", `{"query":"hello","inputs":{},"user":"u1"}`)
		expectStatus(t, rec, 200, "")
		if got := decode(t, rec)["answer"]; got != "[withheld]" {
			t.Errorf("answer = %q", got)
		}
	})
}

func TestSuggestedQuestions(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	travel := decode(t, s.post(t, appTravel, "/v1/chat-messages", `{"query":"A weekend in Lisbon","inputs":{"traveller":"solo"},"user":"u1"}`))
	demoMsg := decode(t, s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"hi","inputs":{},"user":"u1"}`))
	writer := decode(t, s.post(t, appDemoWriter, "/v1/completion-messages", `{"inputs":{"topic":"tea"},"user":"u1"}`))

	tests := []struct {
		name, app, messageID, user string
		wantStatus                 int
		wantCode                   string
	}{
		{"suggestions after an answer", appTravel, travel["message_id"].(string), "u1", 200, ""},
		{"another user's message → 404", appTravel, travel["message_id"].(string), "u2", 404, "not_found"},
		{"an unknown message → 404", appTravel, convID, "u1", 404, "not_found"},
		{"the feature switched off → 400", appDemoChat, demoMsg["message_id"].(string), "u1", 400, "bad_request"},
		{"a completion app → 400", appDemoWriter, writer["message_id"].(string), "u1", 400, "not_chat_app"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, request{method: "GET", path: "/v1/messages/" + tc.messageID + "/suggested?user=" + tc.user, key: s.keys[tc.app]})
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
			if tc.wantStatus == 200 {
				var body struct {
					Result string   `json:"result"`
					Data   []string `json:"data"`
				}
				_ = json.Unmarshal(rec.Body.Bytes(), &body)
				if body.Result != "success" || len(body.Data) != 3 || !strings.Contains(body.Data[0], "Lisbon") {
					t.Errorf("suggestions: %s", rec.Body)
				}
			}
		})
	}
}

func TestStrictProviders(t *testing.T) {
	strict, err := llm.Parse(nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	s := newChatServer(t, chatOptions{llm: strict})
	// The travel app names the deepseek provider, which nothing configures.
	rec := s.post(t, appTravel, "/v1/chat-messages", `{"query":"hi","inputs":{"traveller":"solo"},"user":"u1","response_mode":"streaming"}`)
	expectStatus(t, rec, 400, "provider_not_initialize")
	// The demo app uses the builtin provider, which is always there.
	expectStatus(t, s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"hi","inputs":{},"user":"u1"}`), 200, "")
}

// fakeModels serves every provider with one fake model.
type fakeModels struct{ m *fakeModel }

func (f fakeModels) Chat(string, string) (llm.ChatModel, error) { return f.m, nil }
func (f fakeModels) Backend(string) (string, error)             { return "fake", nil }

// fakeModel streams chunks with a pause before each; failAt >= 0 makes it
// fail instead of sending that chunk. Its Chat answers at once (it is used
// for conversation names and blocking calls).
type fakeModel struct {
	chunks  []string
	pause   time.Duration
	failAt  int
	started chan struct{} // closed when the first chunk was sent
	ended   chan error    // receives how each stream ended
	once    sync.Once
}

func newFakeModel(pause time.Duration, chunks ...string) *fakeModel {
	return &fakeModel{chunks: chunks, pause: pause, failAt: -1, started: make(chan struct{}), ended: make(chan error, 8)}
}

func (m *fakeModel) Chat(ctx context.Context, req llm.ChatRequest) (*llm.ChatResponse, error) {
	if m.failAt >= 0 {
		return nil, apperr.New(400, apperr.CodeCompletionRequestError, "the fake model failed")
	}
	return &llm.ChatResponse{Content: strings.Join(m.chunks, ""), Usage: llm.Usage{PromptTokens: 5, CompletionTokens: 3, TotalTokens: 8,
		TotalPrice: "0.0000123", Currency: "EUR"}}, nil
}

func (m *fakeModel) Stream(ctx context.Context, req llm.ChatRequest, onChunk func(llm.Chunk) error) (*llm.ChatResponse, error) {
	err := m.stream(ctx, onChunk)
	m.ended <- err
	if err != nil {
		return nil, err
	}
	return &llm.ChatResponse{Content: strings.Join(m.chunks, ""), Usage: llm.Usage{PromptTokens: 5, CompletionTokens: 3, TotalTokens: 8}}, nil
}

func (m *fakeModel) stream(ctx context.Context, onChunk func(llm.Chunk) error) error {
	for i, c := range m.chunks {
		select {
		case <-time.After(m.pause):
		case <-ctx.Done():
			return apperr.Wrap(ctx.Err(), 400, apperr.CodeCompletionRequestError, "cancelled")
		}
		if i == m.failAt {
			return apperr.New(400, apperr.CodeCompletionRequestError, "the fake model failed")
		}
		if err := onChunk(llm.Chunk{Delta: c}); err != nil {
			return err
		}
		m.once.Do(func() { close(m.started) })
	}
	return nil
}

// liveStream posts a streaming request to a real HTTP server and returns
// the open response.
func liveStream(t *testing.T, ctx context.Context, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat-messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("status %d: %s", res.StatusCode, b)
	}
	return res
}

// firstFrame reads up to the first data frame of a live stream.
func firstFrame(t *testing.T, r *bufio.Reader) frame {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended early: %v", err)
		}
		if payload, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			if blank, err := r.ReadString('\n'); err != nil || blank != "\n" {
				t.Fatalf("data line not followed by a blank line: %q, %v", blank, err)
			}
			var f frame
			if err := json.Unmarshal([]byte(payload), &f); err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
}

func TestStopDuringStream(t *testing.T) {
	model := newFakeModel(30*time.Millisecond, strings.SplitAfter(strings.Repeat("tick ", 100), " ")...)
	s := newChatServer(t, chatOptions{models: fakeModels{model}})
	srv := httptest.NewServer(s.e)
	defer srv.Close()

	res := liveStream(t, context.Background(), srv.URL, s.keys[appDemoChat], `{"query":"count","inputs":{},"user":"alice","response_mode":"streaming"}`)
	defer res.Body.Close()
	r := bufio.NewReader(res.Body)
	first := firstFrame(t, r)
	task := first.str("task_id")

	// Another user cannot stop it (and is told nothing).
	expectStatus(t, s.post(t, appDemoChat, "/v1/chat-messages/"+task+"/stop", `{"user":"mallory"}`), 200, "")
	// Its owner can.
	expectStatus(t, s.post(t, appDemoChat, "/v1/chat-messages/"+task+"/stop", `{"user":"alice"}`), 200, "")

	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	frames := append([]frame{first}, readFrames(t, string(rest))...)
	answer, end := checkStream(t, frames, true)
	if answer == strings.Join(model.chunks, "") || answer == "" {
		t.Errorf("the answer should be partial: %q", answer)
	}
	if err := <-model.ended; err == nil {
		t.Error("the model call was not cancelled")
	}
	m := storedMessage(t, s, end.str("message_id"))
	if m.Answer != answer || m.Status != chat.StatusNormal {
		t.Errorf("stored after stop: answer %q status %s", m.Answer, m.Status)
	}
	checkLive(t, s, request{method: "POST", path: "/v1/chat-messages", key: s.keys[appDemoChat], body: `{"query":"count","inputs":{},"user":"alice","response_mode":"streaming"}`},
		res, append([]byte("data: "+mustJSON(t, first)+"\n\n"), rest...))
}

// checkLive validates a body read from a live server against openapi.yaml.
func checkLive(t *testing.T, s *chatServer, r request, res *http.Response, body []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	for k, v := range res.Header {
		rec.Header()[k] = v
	}
	rec.WriteHeader(res.StatusCode)
	rec.Body = bytes.NewBuffer(body)
	checkResponse(t, r, rec)
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestClientDisconnectCancelsTheModel(t *testing.T) {
	model := newFakeModel(20*time.Millisecond, strings.SplitAfter(strings.Repeat("word ", 1000), " ")...)
	s := newChatServer(t, chatOptions{models: fakeModels{model}})
	srv := httptest.NewServer(s.e)

	ctx, cancel := context.WithCancel(context.Background())
	res := liveStream(t, ctx, srv.URL, s.keys[appDemoChat], `{"query":"talk","inputs":{},"user":"u1","response_mode":"streaming"}`)
	first := firstFrame(t, bufio.NewReader(res.Body))
	cancel()
	res.Body.Close()

	select {
	case err := <-model.ended:
		if err == nil {
			t.Fatal("the model finished although the client went away")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the model call was not cancelled")
	}
	srv.Close() // waits for the handler, which stores the message first
	m := storedMessage(t, s, first.str("message_id"))
	if m.Status != chat.StatusError || m.Error == nil || m.Answer == "" {
		t.Errorf("stored after disconnect: status %s, error %v, answer %q", m.Status, m.Error, m.Answer)
	}
}

func TestPingWhileTheModelIsSilent(t *testing.T) {
	model := newFakeModel(60*time.Millisecond, "slow ", "answer")
	s := newChatServer(t, chatOptions{models: fakeModels{model}, ping: 5 * time.Millisecond})
	rec := s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"wait","inputs":{},"user":"u1","response_mode":"streaming"}`)
	expectStatus(t, rec, 200, "")
	if !strings.Contains(rec.Body.String(), "event: ping\n\n") {
		t.Fatalf("no ping in %q", rec.Body)
	}
	answer, end := checkStream(t, readFrames(t, rec.Body.String()), true)
	if answer != "slow answer" {
		t.Errorf("answer %q", answer)
	}
	// The fake reports prices, so the message stores them.
	m := storedMessage(t, s, end.str("message_id"))
	if m.MessageTokens != 5 || m.AnswerTokens != 3 || m.ProviderResponseLatency <= 0 {
		t.Errorf("stored usage: %+v", m)
	}
}

func TestModelFailure(t *testing.T) {
	model := newFakeModel(time.Millisecond, "partial ", "never")
	model.failAt = 1
	s := newChatServer(t, chatOptions{models: fakeModels{model}})

	t.Run("mid-stream failure ends with an error event", func(t *testing.T) {
		rec := s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"x","inputs":{},"user":"u1","response_mode":"streaming"}`)
		expectStatus(t, rec, 200, "")
		frames := readFrames(t, rec.Body.String())
		last := frames[len(frames)-1]
		if last.str("event") != "error" || last.str("code") != "completion_request_error" || last["status"] != 400.0 {
			t.Fatalf("last event: %v", last)
		}
		if _, ok := last["task_id"]; ok {
			t.Error("error events carry no task_id")
		}
		for _, f := range frames {
			if f.str("event") == "message_end" {
				t.Error("a failed stream has no message_end")
			}
		}
		m := storedMessage(t, s, last.str("message_id"))
		if m.Status != chat.StatusError || m.Error == nil || *m.Error != "the fake model failed" || m.Answer != "partial " {
			t.Errorf("stored: status %s error %v answer %q", m.Status, m.Error, m.Answer)
		}
	})
	t.Run("blocking failure is an error answer and is stored", func(t *testing.T) {
		rec := s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"y","inputs":{},"user":"u1"}`)
		expectStatus(t, rec, 400, "completion_request_error")
		var n int64
		s.db.Model(&models.Message{}).Where("query = ? AND status = ?", "y", chat.StatusError).Count(&n)
		if n != 1 {
			t.Errorf("%d failed messages stored, want 1", n)
		}
	})
}

func TestPricesAreStoredWhenKnown(t *testing.T) {
	model := newFakeModel(0, "priced")
	s := newChatServer(t, chatOptions{models: fakeModels{model}})
	body := decode(t, s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"x","inputs":{},"user":"u1"}`))
	m := storedMessage(t, s, body["message_id"].(string))
	if m.TotalPrice == nil || *m.TotalPrice != "0.0000123" || m.Currency == nil || *m.Currency != "EUR" {
		t.Errorf("stored price %v %v", m.TotalPrice, m.Currency)
	}
	// The remote model names the conversation in the background, after
	// the answer: wait for the name to be stored.
	var conv models.Conversation
	for range 500 {
		_ = s.db.Take(&conv, "id = ?", body["conversation_id"]).Error
		if conv.Name != chat.DefaultConversationName {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if conv.Name != "priced" {
		t.Errorf("a remote model names the conversation; got %q", conv.Name)
	}
}

func TestManyConcurrentStreams(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			body := `{"query":"stream ` + string(rune('a'+i%26)) + `","inputs":{},"user":"u` + string(rune('a'+i%26)) + `","response_mode":"streaming"}`
			req := request{method: "POST", path: "/v1/chat-messages", key: s.keys[appDemoChat], body: body}.build()
			s.e.ServeHTTP(rec, req)
			if rec.Code != 200 || strings.Count(rec.Body.String(), `"event":"message_end"`) != 1 {
				errs <- errors.New(rec.Body.String())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("stream failed: %v", tail(err.Error()))
	}
	var count int64
	s.db.Model(&models.Message{}).Count(&count)
	if count != n {
		t.Errorf("%d messages stored, want %d", count, n)
	}
}

// modelsOf serves every provider with one chat model.
type modelsOf struct{ m llm.ChatModel }

func (f modelsOf) Chat(string, string) (llm.ChatModel, error) { return f.m, nil }
func (f modelsOf) Backend(string) (string, error)             { return "fake", nil }

// lateTitleModel answers at once but holds back conversation titles (the
// naming prompt asks for a "short title") until release is closed.
type lateTitleModel struct {
	*fakeModel
	release chan struct{}
}

func (m lateTitleModel) Chat(ctx context.Context, req llm.ChatRequest) (*llm.ChatResponse, error) {
	if len(req.Messages) > 0 && strings.Contains(req.Messages[0].Content, "short title") {
		select {
		case <-m.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &llm.ChatResponse{Content: "Trip planning"}, nil
	}
	return m.fakeModel.Chat(ctx, req)
}

// TestLateTitleRenamesConversation covers a title that arrives after the
// blocking answer: the conversation is stored with the default name, then
// renamed, unless the client renamed it first.
func TestLateTitleRenamesConversation(t *testing.T) {
	tests := []struct {
		name, clientName, want string
	}{
		{"the late title is stored", "", "Trip planning"},
		{"a name the client set first is kept", "Mine", "Mine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			model := lateTitleModel{newFakeModel(0, "Sure."), make(chan struct{})}
			s := newChatServer(t, chatOptions{models: modelsOf{model}})
			body := decode(t, s.post(t, appDemoChat, "/v1/chat-messages", `{"query":"Plan a trip","inputs":{},"user":"u1"}`))
			id, _ := body["conversation_id"].(string)
			name := func() string {
				var conv models.Conversation
				if err := s.db.Take(&conv, "id = ?", id).Error; err != nil {
					t.Fatal(err)
				}
				return conv.Name
			}
			if got := name(); got != chat.DefaultConversationName {
				t.Fatalf("name before the title = %q, want %q", got, chat.DefaultConversationName)
			}
			if tc.clientName != "" {
				expectStatus(t, s.post(t, appDemoChat, "/v1/conversations/"+id+"/name",
					`{"name":"`+tc.clientName+`","user":"u1"}`), 200, "")
			}
			close(model.release)
			deadline := time.Now().Add(5 * time.Second)
			for name() != tc.want && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := name(); got != tc.want {
				t.Errorf("name = %q, want %q", got, tc.want)
			}
		})
	}
}
