package handlers_test

import (
	"bufio"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"appkb/models"
)

// counterChatflow is a chatflow that counts its turns in a conversation
// variable: start → code (turns + 1) → assigner (turns := that) → builtin
// llm with memory → answer "Turn N (dialogue D): …".
const counterChatflow = `app: {mode: advanced-chat, name: Counter}
kind: app
version: 0.3.0
workflow:
  conversation_variables:
  - {id: 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f, name: turns, value_type: number, value: 0, description: Turns so far.}
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: name, label: Name, type: text-input, required: false, max_length: 40}]}
    - id: count
      data: {type: code, title: Count, code_language: javascript, code: 'function main({n}) { return {next: n + 1} }',
        variables: [{variable: n, value_selector: [conversation, turns]}], outputs: {next: {type: number}}}
    - id: keep
      data: {type: assigner, title: Keep, version: '2', items: [
        {variable_selector: [conversation, turns], input_type: variable, operation: over-write, value: [count, next]}]}
    - id: ask
      data: {type: llm, title: Ask, model: {provider: appkb, name: builtin, mode: chat},
        prompt_template: [{role: system, text: 'Answer {{#start.name#}} briefly.'}],
        memory: {window: {enabled: true, size: 10}, query_prompt_template: '{{#sys.query#}}'}}
    - id: answer
      data: {type: answer, title: Answer, answer: 'Turn {{#count.next#}} (dialogue {{#sys.dialogue_count#}}): {{#ask.text#}}'}
    edges:
    - {source: start, sourceHandle: source, target: count}
    - {source: count, sourceHandle: source, target: keep}
    - {source: keep, sourceHandle: source, target: ask}
    - {source: ask, sourceHandle: source, target: answer}
`

const appCounter = "counter"

// checkChatflowStream checks the order of a chatflow stream on top of
// checkStream: workflow_started first, message events only between it and
// workflow_finished, and message_end right after workflow_finished. It
// returns the streamed answer and the message_end event.
func checkChatflowStream(t *testing.T, frames []frame) (string, frame) {
	t.Helper()
	answer, end := checkStream(t, frames, true)
	var names []string
	for _, f := range frames {
		if ev := f.str("event"); ev != "ping" {
			names = append(names, ev)
		}
	}
	n := len(names)
	if n < 4 || names[0] != "workflow_started" || names[n-2] != "workflow_finished" || names[n-1] != "message_end" {
		t.Fatalf("stream order %v", names)
	}
	messages := 0
	for i, name := range names {
		switch name {
		case "workflow_started", "workflow_finished":
			if i != 0 && i != n-2 {
				t.Errorf("%s at %d in %v", name, i, names)
			}
		case "message":
			messages++
		case "node_started", "node_finished", "message_end", "agent_log":
		default:
			t.Errorf("unexpected event %s", name)
		}
	}
	if messages == 0 {
		t.Errorf("no message events: %v", names)
	}
	return answer, end
}

func TestChatflowTurns(t *testing.T) {
	s := newChatServer(t, chatOptions{extra: map[string]string{appCounter: counterChatflow}})

	// First turn, blocking: a new conversation named after the query.
	rec := s.post(t, appCounter, "/v1/chat-messages", `{"query":"hello there friend","inputs":{"name":"Ada"},"user":"alice"}`)
	expectStatus(t, rec, 200, "")
	first := decode(t, rec)
	conv, _ := first["conversation_id"].(string)
	if first["mode"] != "advanced-chat" || conv == "" {
		t.Fatalf("blocking answer %v", first)
	}
	if a, _ := first["answer"].(string); !strings.HasPrefix(a, "Turn 1 (dialogue 1): ") || len(a) <= len("Turn 1 (dialogue 1): ") {
		t.Errorf("first answer %q", a)
	}
	m1 := storedMessage(t, s, first["message_id"].(string))
	if m1.Status != "normal" || m1.WorkflowRunID == nil || m1.Answer != first["answer"] || m1.TotalTokens == 0 {
		t.Errorf("stored first message %+v", m1)
	}
	var run models.WorkflowRun
	if err := s.db.Take(&run, "id = ?", *m1.WorkflowRunID).Error; err != nil {
		t.Fatal(err)
	}
	if run.ConversationID == nil || *run.ConversationID != conv || run.MessageID == nil || *run.MessageID != m1.ID || run.Status != "succeeded" {
		t.Errorf("recorded run %+v", run)
	}

	// Second turn, streaming, in the same conversation: the counter goes on.
	rec = s.post(t, appCounter, "/v1/chat-messages", `{"query":"and again","inputs":{},"user":"alice","response_mode":"streaming","conversation_id":"`+conv+`"}`)
	expectStatus(t, rec, 200, "")
	answer, end := checkChatflowStream(t, readFrames(t, rec.Body.String()))
	if !strings.HasPrefix(answer, "Turn 2 (dialogue 2): ") {
		t.Errorf("second answer %q", answer)
	}
	if end.str("conversation_id") != conv {
		t.Errorf("second turn in %s, want %s", end.str("conversation_id"), conv)
	}
	if usage, _ := at(map[string]any(end), "metadata", "usage", "total_tokens").(float64); usage == 0 {
		t.Errorf("message_end without usage: %v", end)
	}
	if rr, ok := at(map[string]any(end), "metadata", "retriever_resources").([]any); !ok || len(rr) != 0 {
		t.Errorf("retriever_resources %v", at(map[string]any(end), "metadata", "retriever_resources"))
	}
	m2 := storedMessage(t, s, end.str("message_id"))
	if m2.Answer != answer || !strings.Contains(m2.Inputs, `"name":"Ada"`) {
		t.Errorf("stored second message %+v", m2)
	}
	if m2.MessageTokens+m2.AnswerTokens+m2.TotalTokens == 0 {
		t.Error("second message stored no tokens")
	}
	// The llm node's memory got the first turn.
	var ask models.WorkflowNodeExecution
	if m2.WorkflowRunID == nil {
		t.Fatal("second message has no run")
	}
	if err := s.db.Take(&ask, "workflow_run_id = ? AND node_id = ?", *m2.WorkflowRunID, "ask").Error; err != nil {
		t.Fatal(err)
	}
	if ask.ProcessData == nil || !strings.Contains(*ask.ProcessData, "hello there friend") {
		t.Errorf("the second prompt lacks the first turn: %v", ask.ProcessData)
	}

	var c models.Conversation
	if err := s.db.Take(&c, "id = ?", conv).Error; err != nil {
		t.Fatal(err)
	}
	if c.DialogueCount != 2 || c.Name != "hello there friend" || c.Mode != "advanced-chat" {
		t.Errorf("conversation after two turns: %+v", c)
	}

	// The conversation variable shows the count.
	rec = s.do(t, request{method: "GET", path: "/v1/conversations/" + conv + "/variables?user=alice", key: s.keys[appCounter]})
	expectStatus(t, rec, 200, "")
	vars, _ := decode(t, rec)["data"].([]any)
	if len(vars) != 1 || at(vars[0].(map[string]any), "name") != "turns" || at(vars[0].(map[string]any), "value") != "2" {
		t.Errorf("conversation variables %v", vars)
	}

	// History lists both turns.
	rec = s.do(t, request{method: "GET", path: "/v1/messages?user=alice&conversation_id=" + conv, key: s.keys[appCounter]})
	expectStatus(t, rec, 200, "")
	msgs, _ := decode(t, rec)["data"].([]any)
	if len(msgs) != 2 || at(msgs[0].(map[string]any), "query") != "hello there friend" || at(msgs[1].(map[string]any), "query") != "and again" {
		t.Errorf("history %v", msgs)
	}

	// A fresh conversation starts counting again.
	rec = s.post(t, appCounter, "/v1/chat-messages", `{"query":"new","inputs":{},"user":"alice","response_mode":"streaming"}`)
	expectStatus(t, rec, 200, "")
	if answer, end := checkChatflowStream(t, readFrames(t, rec.Body.String())); !strings.HasPrefix(answer, "Turn 1 ") || end.str("conversation_id") == conv {
		t.Errorf("a new conversation answered %q in %s", answer, end.str("conversation_id"))
	}

	tests := []struct {
		name, body string
		wantStatus int
		wantCode   string
	}{
		{"another user's conversation → 404",
			`{"query":"hi","inputs":{},"user":"mallory","conversation_id":"` + conv + `"}`, 404, "not_found"},
		{"an unknown conversation → 404",
			`{"query":"hi","inputs":{},"user":"alice","conversation_id":"5f0c3e52-8b6f-4bd0-9d0a-0c7b1f4e2a10"}`, 404, "not_found"},
		{"an unknown workflow version → 404",
			`{"query":"hi","inputs":{},"user":"alice","workflow_id":"5f0c3e52-8b6f-4bd0-9d0a-0c7b1f4e2a10"}`, 404, "not_found"},
		{"a workflow id that is no uuid → 400",
			`{"query":"hi","inputs":{},"user":"alice","workflow_id":"nope"}`, 400, "bad_request"},
		{"the pinned version runs",
			`{"query":"hi","inputs":{},"user":"alice","workflow_id":"` + run.WorkflowID + `"}`, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expectStatus(t, s.post(t, appCounter, "/v1/chat-messages", tc.body), tc.wantStatus, tc.wantCode)
		})
	}
}

// failingChatflow fails in a code node after the answer began.
const failingChatflow = `app: {mode: advanced-chat, name: Failing}
kind: app
version: 0.3.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: hello
      data: {type: answer, title: Hello, answer: 'Working on it. '}
    - id: boom
      data: {type: code, title: Boom, code_language: javascript, code: 'function main() { throw new Error("kaboom") }', outputs: {}}
    - id: answer
      data: {type: answer, title: Answer, answer: 'done'}
    edges:
    - {source: start, sourceHandle: source, target: hello}
    - {source: hello, sourceHandle: source, target: boom}
    - {source: boom, sourceHandle: source, target: answer}
`

func TestChatflowFailure(t *testing.T) {
	s := newChatServer(t, chatOptions{extra: map[string]string{"failing": failingChatflow}})
	rec := s.post(t, "failing", "/v1/chat-messages", `{"query":"go","inputs":{},"user":"u1","response_mode":"streaming"}`)
	expectStatus(t, rec, 200, "")
	frames := readFrames(t, rec.Body.String())
	last := frames[len(frames)-1]
	if last.str("event") != "error" || !strings.Contains(last.str("message"), "kaboom") {
		t.Fatalf("last frame %v", last)
	}
	for _, f := range frames {
		if f.str("event") == "message_end" {
			t.Error("a failed run sent message_end")
		}
	}
	var m models.Message
	if err := s.db.Take(&m, "id = ?", last.str("message_id")).Error; err != nil {
		t.Fatal(err)
	}
	if m.Status != "error" || m.Error == nil || !strings.Contains(*m.Error, "kaboom") {
		t.Errorf("stored failed message %+v", m)
	}

	rec = s.post(t, "failing", "/v1/chat-messages", `{"query":"go","inputs":{},"user":"u1"}`)
	expectStatus(t, rec, 400, "invalid_param")
}

// TestChatflowSupportDesk runs testdata/apps/advanced-chat.yml on the
// builtin model.
func TestChatflowSupportDesk(t *testing.T) {
	s := newChatServer(t, chatOptions{})
	rec := s.post(t, appChatflow, "/v1/chat-messages", `{"query":"I want a refund","inputs":{"customer_name":"Ada"},"user":"u1","response_mode":"streaming"}`)
	expectStatus(t, rec, 200, "")
	answer, end := checkChatflowStream(t, readFrames(t, rec.Body.String()))
	if answer == "" {
		t.Error("empty answer")
	}
	conv := end.str("conversation_id")
	rec = s.post(t, appChatflow, "/v1/chat-messages", `{"query":"where is my parcel","inputs":{},"user":"u1","conversation_id":"`+conv+`"}`)
	expectStatus(t, rec, 200, "")
	if a, _ := decode(t, rec)["answer"].(string); a == "" {
		t.Error("empty blocking answer")
	}
}

// spinningChatflow answers a little, then spins in a code node until it is
// stopped.
const spinningChatflow = `app: {mode: advanced-chat, name: Spinning}
kind: app
version: 0.3.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: hello
      data: {type: answer, title: Hello, answer: 'Spinning. '}
    - id: spin
      data: {type: code, title: Spin, code_language: javascript, code: 'function main() { while (true) {} }', outputs: {}}
    - id: answer
      data: {type: answer, title: Answer, answer: 'never'}
    edges:
    - {source: start, sourceHandle: source, target: hello}
    - {source: hello, sourceHandle: source, target: spin}
    - {source: spin, sourceHandle: source, target: answer}
`

func TestChatflowStop(t *testing.T) {
	s := newChatServer(t, chatOptions{extra: map[string]string{"spinning": spinningChatflow}})
	srv := httptest.NewServer(s.e)
	defer srv.Close()
	body := `{"query":"spin","inputs":{},"user":"alice","response_mode":"streaming"}`
	res := liveStream(t, context.Background(), srv.URL, s.keys["spinning"], body)
	defer res.Body.Close()
	r := bufio.NewReader(res.Body)
	first := firstFrame(t, r)
	task := first.str("task_id")
	// Stop only once the spinning node runs, so the first answer is out.
	frames := []frame{first}
	for {
		f := firstFrame(t, r)
		frames = append(frames, f)
		if f.str("event") == "node_started" && at(map[string]any(f), "data", "node_id") == "spin" {
			break
		}
	}

	// Another user's stop does nothing; the owner's ends the run.
	expectStatus(t, s.post(t, "spinning", "/v1/chat-messages/"+task+"/stop", `{"user":"mallory"}`), 200, "")
	expectStatus(t, s.post(t, "spinning", "/v1/chat-messages/"+task+"/stop", `{"user":"alice"}`), 200, "")

	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	var raw strings.Builder
	for _, f := range frames {
		raw.WriteString("data: " + mustJSON(t, f) + "\n\n")
	}
	frames = append(frames, readFrames(t, string(rest))...)
	answer, end := checkChatflowStream(t, frames)
	if answer != "Spinning. " {
		t.Errorf("answer after stop %q", answer)
	}
	if st := at(map[string]any(frames[len(frames)-2]), "data", "status"); st != "stopped" {
		t.Errorf("run status %v", st)
	}
	if m := storedMessage(t, s, end.str("message_id")); m.Answer != answer || m.Status != "normal" {
		t.Errorf("stored after stop: %+v", m)
	}
	checkLive(t, s, request{method: "POST", path: "/v1/chat-messages", key: s.keys["spinning"], body: body},
		res, append([]byte(raw.String()), rest...))
}
