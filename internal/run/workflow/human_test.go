package workflow

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// memForms is an in-memory FormStore.
type memForms struct {
	mu    sync.Mutex
	forms map[string]*HumanForm // by node id
}

func (m *memForms) CreateForm(_ context.Context, _ string, f *HumanForm) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.forms == nil {
		m.forms = map[string]*HumanForm{}
	}
	cp := *f
	m.forms[f.NodeID] = &cp
	return nil
}

// approvalGraph: start → review (human input, approve / reject) → an end
// per action; a parallel branch (start → side template) runs meanwhile.
const approvalGraph = `
  - id: review
    data:
      type: human-input
      title: Review
      form_content: "Please check {{#start.q#}}. Comment: {{#$outputs.comment#}}"
      inputs:
      - {type: paragraph, output_variable_name: comment, default: {type: variable, selector: [start, q], value: ''}}
      - {type: select, output_variable_name: level, option_source: {type: constant, value: [low, high]}}
      user_actions:
      - {id: approve, title: Approve, button_style: primary}
      - {id: reject, title: Reject}
      timeout: 2
      timeout_unit: day
  - id: side
    data: {type: template-transform, title: Side, template: 'side {{ q }}', variables: [{variable: q, value_selector: [start, q]}]}
  - id: yes
    data: {type: end, title: Yes, outputs: [{variable: verdict, value_selector: [review, __action_id]}, {variable: comment, value_selector: [review, comment]}, {variable: side, value_selector: [side, output]}]}
  - id: no
    data: {type: end, title: No, outputs: [{variable: verdict, value_selector: [review, __action_id]}]}
  - id: late
    data: {type: end, title: Late, outputs: [{variable: verdict, value_selector: [review, __action_id]}]}`

func approvalEdges() []string {
	return []string{
		edge("start", "source", "review"), edge("start", "source", "side"),
		edge("review", "approve", "yes"), edge("side", "source", "yes"),
		edge("review", "reject", "no"), edge("review", TimeoutAction, "late"),
	}
}

func TestHumanInputPauseAndResume(t *testing.T) {
	g, err := Compile(graphYAML(t, graph(approvalGraph, approvalEdges()...)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		answer      func(f *HumanForm)
		wantVerdict string
		wantEnd     string
		wantEvent   string
	}{
		{"approve", func(f *HumanForm) {
			f.Status, f.ActionID, f.Data = FormSubmitted, "approve", map[string]any{"comment": "fine", "level": "low"}
		}, "approve", "yes", EventHumanInputFormFilled},
		{"reject", func(f *HumanForm) {
			f.Status, f.ActionID, f.Data = FormSubmitted, "reject", map[string]any{"comment": "no", "level": "high"}
		}, "reject", "no", EventHumanInputFormFilled},
		{"timeout", func(f *HumanForm) { f.Status = FormTimeout }, TimeoutAction, "late", EventHumanInputFormTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forms := &memForms{}
			e := &Engine{Forms: forms}
			res, rec := run1(t, e, RunInput{Graph: g, Inputs: map[string]any{"q": "the draft"}, RunID: "run-1"})
			if res.Status != RunPaused {
				t.Fatalf("status %s (%s)", res.Status, res.Error)
			}
			names := rec.names()
			if names[len(names)-1] != EventWorkflowPaused || !strings.Contains(strings.Join(names, " "), EventHumanInputRequired) {
				t.Fatalf("events %v", names)
			}
			if rec.finished("review") != nil {
				t.Error("the paused node finished")
			}
			if rec.finished("side") == nil {
				t.Error("the parallel branch did not run before the pause")
			}
			form := forms.forms["review"]
			if form == nil || form.Token == "" || form.Status != FormWaiting {
				t.Fatalf("form %+v", form)
			}
			if form.Content != "Please check the draft. Comment: {{#$outputs.comment#}}" || form.Defaults["comment"] != "the draft" {
				t.Errorf("form content %q defaults %v", form.Content, form.Defaults)
			}
			if d := time.Until(time.Unix(form.ExpiresAt, 0)); d < 47*time.Hour || d > 49*time.Hour {
				t.Errorf("form expires in %s", d)
			}

			// The snapshot survives storage as JSON.
			text, err := res.Snapshot.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			snap, err := UnmarshalSnapshot(text)
			if err != nil {
				t.Fatal(err)
			}
			tc.answer(form)
			res2, rec2 := run1(t, e, RunInput{Graph: g, Inputs: map[string]any{"q": "the draft"}, RunID: "run-1",
				Resume: &Resume{Snapshot: snap, Forms: forms.forms}})
			if res2.Status != RunSucceeded {
				t.Fatalf("resumed status %s (%s)", res2.Status, res2.Error)
			}
			checkOrder(t, rec2)
			if ws := rec2.events[0].(*WorkflowStarted); ws.Data.Reason != "resumption" || ws.Data.CreatedAt != snap.CreatedAt {
				t.Errorf("workflow_started %+v", ws.Data)
			}
			if !strings.Contains(strings.Join(rec2.names(), " "), tc.wantEvent) {
				t.Errorf("no %s in %v", tc.wantEvent, rec2.names())
			}
			if res2.Outputs["verdict"] != tc.wantVerdict {
				t.Errorf("outputs %v", res2.Outputs)
			}
			if rec2.finished(tc.wantEnd) == nil {
				t.Errorf("end %s did not run: %s", tc.wantEnd, rec2.trace())
			}
			if rec2.finished("side") != nil || rec2.finished("start") != nil {
				t.Errorf("nodes ran again after resuming: %s", rec2.trace())
			}
			if tc.name == "approve" && (res2.Outputs["comment"] != "fine" || res2.Outputs["side"] != "side the draft") {
				t.Errorf("outputs %v", res2.Outputs)
			}
			if res2.TotalSteps <= res.TotalSteps {
				t.Errorf("steps %d after %d", res2.TotalSteps, res.TotalSteps)
			}
		})
	}
}

func TestHumanInputNeedsFormStoreAndTopLevel(t *testing.T) {
	g, err := Compile(graphYAML(t, graph(approvalGraph, approvalEdges()...)))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := run1(t, &Engine{}, RunInput{Graph: g, Inputs: map[string]any{"q": "x"}})
	if res.Status != RunFailed || !strings.Contains(res.Error, "form store") {
		t.Errorf("status %s error %q", res.Status, res.Error)
	}
}

func TestHumanFormCheckAnswer(t *testing.T) {
	f := &HumanForm{
		Inputs:  []map[string]any{{"type": "paragraph", "output_variable_name": "comment"}, {"type": "select", "output_variable_name": "level"}},
		Actions: []map[string]any{{"id": "approve", "title": "Approve"}},
		Options: map[string][]string{"level": {"low", "high"}},
	}
	tests := []struct {
		name, action string
		data         map[string]any
		want         string
	}{
		{"valid", "approve", map[string]any{"comment": "ok", "level": "low"}, ""},
		{"unknown action", "delete", map[string]any{"comment": "ok", "level": "low"}, `Unknown action "delete".`},
		{"missing field", "approve", map[string]any{"level": "low"}, "Missing required inputs: comment"},
		{"not text", "approve", map[string]any{"comment": 3.0, "level": "low"}, `The input "comment" must be text.`},
		{"not an option", "approve", map[string]any{"comment": "ok", "level": "max"}, `The input "level" must be one of: low, high.`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.CheckAnswer(tc.action, tc.data); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
