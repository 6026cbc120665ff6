package handlers_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"appkb/handlers"
	"appkb/internal/wiring"
	"appkb/models"
)

// approvalApp pauses on a review form; approve leads to an end that
// echoes the comment, reject to another.
const approvalApp = `app: {mode: workflow, name: Approval}
kind: app
version: 0.6.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: doc, label: Doc, type: text-input, required: true}]}
    - id: review
      data:
        type: human-input
        title: Review
        delivery_methods: [{type: webapp, enabled: true}]
        form_content: "Review {{#start.doc#}}: {{#$outputs.comment#}}"
        inputs:
        - {type: paragraph, output_variable_name: comment, default: {type: constant, value: 'looks fine'}}
        user_actions:
        - {id: approve, title: Approve, button_style: primary}
        - {id: reject, title: Reject, button_style: default}
    - id: yes
      data: {type: end, title: Yes, outputs: [{variable: verdict, value_selector: [review, __action_id]}, {variable: comment, value_selector: [review, comment]}]}
    - id: no
      data: {type: end, title: No, outputs: [{variable: verdict, value_selector: [review, __action_id]}]}
    edges:
    - {source: start, sourceHandle: source, target: review}
    - {source: review, sourceHandle: approve, target: yes}
    - {source: review, sourceHandle: reject, target: no}
`

// restarted is a second server over the same database, as after a
// restart: nothing of the first one's memory carries over.
func restarted(t *testing.T, s *testServer) *testServer {
	t.Helper()
	_, _, specYAML := loadContract(t)
	e, err := wiring.NewServer(handlers.Deps{DB: s.db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SpecYAML: specYAML, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{e: e, db: s.db, appID: s.appID, appKey: s.appKey, knowledgeKey: s.knowledgeKey}
}

func TestHumanInputPauseResumeAcrossRestart(t *testing.T) {
	s := newTestServer(t)
	_, key := s.importText(t, approvalApp)

	// The run pauses: the stream ends with workflow_paused.
	rec := s.do(t, request{method: "POST", path: "/v1/workflows/run", key: key,
		body: `{"inputs":{"doc":"the plan"},"user":"ann","response_mode":"streaming"}`})
	expectStatus(t, rec, 200, "")
	frames := readFrames(t, rec.Body.String())
	var names []string
	var required frame
	for _, f := range frames {
		names = append(names, f.str("event"))
		if f.str("event") == "human_input_required" {
			required = f
		}
	}
	if names[len(names)-1] != "workflow_paused" || required == nil {
		t.Fatalf("events %v", names)
	}
	token, _ := at(map[string]any(required), "data", "form_token").(string)
	runID := required.str("workflow_run_id")
	if token == "" || runID == "" {
		t.Fatalf("human_input_required %v", required)
	}
	if st := s.getJSON(t, "/v1/workflows/run/"+runID, key)["status"]; st != "paused" {
		t.Errorf("stored status %v", st)
	}

	// The first server stops; the form is read and answered on the next.
	s2 := restarted(t, s)
	form := s2.getJSON(t, "/v1/form/human_input/"+token, key)
	if form["form_content"] != "Review the plan: {{#$outputs.comment#}}" || at(form, "resolved_default_values", "comment") != "looks fine" {
		t.Errorf("form %v", form)
	}
	if at(form, "user_actions", 0, "id") != "approve" {
		t.Errorf("actions %v", form["user_actions"])
	}

	refusals := []struct {
		name, token, body string
		status            int
		code              string
	}{
		{"unknown token", "nope", `{"inputs":{"comment":"x"},"action":"approve","user":"ann"}`, 404, "not_found"},
		{"unknown action", token, `{"inputs":{"comment":"x"},"action":"delete","user":"ann"}`, 400, "invalid_form_data"},
		{"missing field", token, `{"inputs":{},"action":"approve","user":"ann"}`, 400, "invalid_form_data"},
		{"missing action", token, `{"inputs":{"comment":"x"},"user":"ann"}`, 400, "invalid_param"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			rec := s2.do(t, request{method: "POST", path: "/v1/form/human_input/" + tc.token, key: key, body: tc.body})
			expectStatus(t, rec, tc.status, tc.code)
		})
	}

	rec = s2.do(t, request{method: "POST", path: "/v1/form/human_input/" + token, key: key,
		body: `{"inputs":{"comment":"ship it"},"action":"approve","user":"bob"}`})
	expectStatus(t, rec, 200, "")
	// Forms are answered once.
	expectStatus(t, s2.do(t, request{method: "POST", path: "/v1/form/human_input/" + token, key: key,
		body: `{"inputs":{"comment":"again"},"action":"reject","user":"ann"}`}), 412, "human_input_form_submitted")
	expectStatus(t, s2.do(t, request{method: "GET", path: "/v1/form/human_input/" + token, key: key}), 412, "human_input_form_submitted")

	// Someone else cannot follow the run.
	expectStatus(t, s2.do(t, request{method: "GET", path: "/v1/workflow/" + runID + "/events?user=eve", key: key}), 404, "not_found")

	// The owner follows the resumed run to its end.
	rec = s2.do(t, request{method: "GET", path: "/v1/workflow/" + runID + "/events?user=ann", key: key})
	expectStatus(t, rec, 200, "")
	frames = readFrames(t, rec.Body.String())
	last := frames[len(frames)-1]
	if last.str("event") != "workflow_finished" || at(map[string]any(last), "data", "status") != "succeeded" {
		t.Fatalf("last event %v", last)
	}
	detail := s2.getJSON(t, "/v1/workflows/run/"+runID, key)
	if detail["status"] != "succeeded" || !strings.Contains(mustJSON(t, detail["outputs"]), `"comment":"ship it"`) ||
		!strings.Contains(mustJSON(t, detail["outputs"]), `"verdict":"approve"`) {
		t.Errorf("run detail %v", detail)
	}

	// With the snapshot, the stored node executions come first.
	rec = s2.do(t, request{method: "GET", path: "/v1/workflow/" + runID + "/events?user=ann&include_state_snapshot=true", key: key})
	frames = readFrames(t, rec.Body.String())
	var nodes []string
	for _, f := range frames[:3] {
		id, _ := at(map[string]any(f), "data", "node_id").(string)
		nodes = append(nodes, f.str("event")+":"+id)
	}
	if got := strings.Join(nodes, " "); got != "node_finished:start node_finished:review node_finished:yes" {
		t.Errorf("replayed %s", got)
	}
	if last := frames[len(frames)-1]; last.str("event") != "workflow_finished" {
		t.Errorf("last event %v", last)
	}
}

func TestHumanInputBlockingAndExpiry(t *testing.T) {
	s := newTestServer(t)
	_, key := s.importText(t, approvalApp)
	rec := s.do(t, request{method: "POST", path: "/v1/workflows/run", key: key, body: `{"inputs":{"doc":"memo"},"user":"ann"}`})
	expectStatus(t, rec, 200, "")
	body := decode(t, rec)
	if at(body, "data", "status") != "paused" {
		t.Fatalf("blocking answer %v", body)
	}
	runID, _ := body["workflow_run_id"].(string)

	// A paused run's events end with its form, then workflow_paused, and
	// the stream ends there.
	rec = s.do(t, request{method: "GET", path: "/v1/workflow/" + runID + "/events?user=ann", key: key})
	frames := readFrames(t, rec.Body.String())
	n := len(frames)
	if n < 2 || frames[n-2].str("event") != "human_input_required" || frames[n-1].str("event") != "workflow_paused" {
		t.Fatalf("events of a paused run %v", frames)
	}
	token, _ := at(map[string]any(frames[n-2]), "data", "form_token").(string)

	var form models.HumanInputForm
	if err := s.db.Where("token = ?", token).Take(&form).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.db.Model(&form).Update("expires_at", time.Now().Add(-time.Minute).UTC()).Error; err != nil {
		t.Fatal(err)
	}
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/form/human_input/" + token, key: key}), 412, "human_input_form_expired")
	expectStatus(t, s.do(t, request{method: "POST", path: "/v1/form/human_input/" + token, key: key,
		body: `{"inputs":{"comment":"late"},"action":"approve","user":"ann"}`}), 412, "human_input_form_expired")

	// Forms belong to workflow and chatflow apps only.
	expectStatus(t, s.do(t, request{method: "GET", path: "/v1/form/human_input/" + token, key: s.appKey}), 400, "not_workflow_app")
	var stored models.WorkflowRun
	if err := s.db.Where("id = ?", runID).Take(&stored).Error; err != nil || stored.PauseState == nil {
		t.Fatalf("paused run %+v %v", stored, err)
	}
	var snap map[string]any
	if err := json.Unmarshal([]byte(*stored.PauseState), &snap); err != nil || snap["paused"] == nil {
		t.Errorf("pause state %v %v", snap, err)
	}
}

// approvalChatflow answers, waits on a form, then answers again.
const approvalChatflow = `app: {mode: advanced-chat, name: Approval chat}
kind: app
version: 0.6.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: hold
      data: {type: answer, title: Hold, answer: 'Asking a human. '}
    - id: review
      data:
        type: human-input
        title: Review
        form_content: "{{#sys.query#}}? {{#$outputs.reply#}}"
        inputs: [{type: paragraph, output_variable_name: reply}]
        user_actions: [{id: send, title: Send}]
    - id: reply
      data: {type: answer, title: Reply, answer: 'They say: {{#review.reply#}}'}
    edges:
    - {source: start, sourceHandle: source, target: hold}
    - {source: hold, sourceHandle: source, target: review}
    - {source: review, sourceHandle: send, target: reply}
`

func TestHumanInputChatflow(t *testing.T) {
	s := newTestServer(t)
	_, key := s.importText(t, approvalChatflow)
	rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key,
		body: `{"query":"may I","inputs":{},"user":"ann","response_mode":"streaming"}`})
	expectStatus(t, rec, 200, "")
	frames := readFrames(t, rec.Body.String())
	last := frames[len(frames)-1]
	if last.str("event") != "workflow_paused" {
		t.Fatalf("last event %v", last)
	}
	var token string
	for _, f := range frames {
		if f.str("event") == "human_input_required" {
			token, _ = at(map[string]any(f), "data", "form_token").(string)
		}
	}
	runID, conv := last.str("workflow_run_id"), frames[0].str("conversation_id")
	expectStatus(t, s.do(t, request{method: "POST", path: "/v1/form/human_input/" + token, key: key,
		body: `{"inputs":{"reply":"yes"},"action":"send","user":"ann"}`}), 200, "")

	rec = s.do(t, request{method: "GET", path: "/v1/workflow/" + runID + "/events?user=ann", key: key})
	frames = readFrames(t, rec.Body.String())
	if end := frames[len(frames)-1]; end.str("event") != "message_end" || end.str("conversation_id") != conv {
		t.Errorf("the resumed chat stream ends with %v", end)
	}
	var answer strings.Builder
	for _, f := range frames {
		if f.str("event") == "message" {
			answer.WriteString(f.str("answer"))
		}
	}
	if answer.String() != "They say: yes" {
		t.Errorf("resumed answer %q", answer.String())
	}
	msgs := s.getJSON(t, "/v1/messages?user=ann&conversation_id="+conv, key)
	if got := at(msgs, "data", 0, "answer"); got != "Asking a human. They say: yes" {
		t.Errorf("stored answer %v", got)
	}
}
