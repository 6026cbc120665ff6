package flows_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/conversation/files"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/chat"
	"appkb/internal/run/flows"
	"appkb/internal/run/workflow"
)

const chatApp = `app: {mode: chat, name: Chat}
kind: app
version: 0.3.0
model_config:
  model: {provider: appkb, name: builtin, mode: chat}
  pre_prompt: Answer briefly.
`

const completionApp = `app: {mode: completion, name: Writer}
kind: app
version: 0.3.0
model_config:
  model: {provider: appkb, name: builtin, mode: completion}
  pre_prompt: 'Write about {{topic}}.'
  user_input_form:
  - text-input: {label: Topic, variable: topic, required: true}
`

const chatflowApp = `app: {mode: advanced-chat, name: Echo}
kind: app
version: 0.3.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: answer
      data: {type: answer, title: Answer, answer: 'You said {{#sys.query#}}'}
    edges:
    - {source: start, sourceHandle: source, target: answer}
`

const workflowApp = `app: {mode: workflow, name: Greeter}
kind: app
version: 0.3.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: name, label: Name, type: text-input, required: true}]}
    - id: end
      data: {type: end, title: End, outputs: [{variable: greeting, value_selector: [start, name]}]}
    edges:
    - {source: start, sourceHandle: source, target: end}
`

func newService(t *testing.T) (*flows.Service, map[string]string) {
	t.Helper()
	gdb := db.OpenTemp(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := apps.NewStore(gdb)
	ids := map[string]string{}
	for name, text := range map[string]string{"chat": chatApp, "completion": completionApp, "chatflow": chatflowApp, "workflow": workflowApp, "approval": approvalApp} {
		app, err := store.Import(context.Background(), []byte(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ids[name] = app.ID
	}
	uploads := files.NewStore(gdb, t.TempDir())
	chatSvc := chat.New(chat.Config{DB: gdb, Logger: log, ResolveFiles: flows.AttachedFiles(uploads)})
	svc := flows.New(flows.Config{DB: gdb, Chat: chatSvc, Files: uploads, Logger: log})
	svc.Start(context.Background())
	t.Cleanup(svc.Stop)
	return svc, ids
}

// TestRunEveryMode runs each app mode through the one entry point a
// caller without routes uses (OpAuto), blocking and streaming, and checks
// that the answer text of the stream is the blocking answer's.
func TestRunEveryMode(t *testing.T) {
	svc, ids := newService(t)
	tests := []struct {
		name       string
		app        string
		req        flows.Request
		wantAnswer string // a part of the answer
		wantEvents []string
	}{
		{"chat", "chat", flows.Request{Request: chat.Request{Query: "hello there"}}, "hello there", []string{"message", "message_end"}},
		{"completion", "completion", flows.Request{Request: chat.Request{Inputs: map[string]any{"topic": "tea"}}}, "tea", []string{"message", "message_end"}},
		{"chatflow", "chatflow", flows.Request{Request: chat.Request{Query: "ping"}}, "You said ping", []string{"workflow_started", "message", "workflow_finished", "message_end"}},
		{"workflow", "workflow", flows.Request{Request: chat.Request{Inputs: map[string]any{"name": "Ada"}}}, "Ada", []string{"workflow_started", "workflow_finished"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			req := tc.req
			req.AppID, req.User, req.AutoGenerateName = ids[tc.app], "alice", true

			run, err := svc.Run(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			res, err := run.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Answer, tc.wantAnswer) || res.TaskID == "" || res.Body == nil {
				t.Fatalf("blocking result %+v", res)
			}
			if _, err := json.Marshal(res.Body); err != nil {
				t.Fatal(err)
			}

			req.Streaming = true
			run, err = svc.Run(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var text strings.Builder
			for ev := range run.Events() {
				names = append(names, ev.Name)
				text.WriteString(ev.Delta)
				if _, err := json.Marshal(ev.Payload); err != nil {
					t.Fatalf("%s: %v", ev.Name, err)
				}
			}
			if err := run.Err(); err != nil {
				t.Fatal(err)
			}
			if !containsInOrder(names, tc.wantEvents) {
				t.Errorf("events %v, want %v in order", names, tc.wantEvents)
			}
			// A workflow's end node streams no text; the others do.
			if tc.app != "workflow" && !strings.Contains(text.String(), tc.wantAnswer) {
				t.Errorf("streamed text %q", text.String())
			}
		})
	}
}

func containsInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestRefusals checks that a request refused before it runs comes back as
// the error of the call, with the operation's code.
func TestRefusals(t *testing.T) {
	svc, ids := newService(t)
	tests := []struct {
		name string
		req  flows.Request
		code string
	}{
		{"workflow op on a chat app", flows.Request{Op: flows.OpWorkflow, Request: chat.Request{AppID: ids["chat"], User: "u"}}, apperr.CodeNotWorkflowApp},
		{"chat op on a workflow app", flows.Request{Op: flows.OpChat, Request: chat.Request{AppID: ids["workflow"], User: "u", Query: "q"}}, apperr.CodeNotChatApp},
		{"completion op on a chat app", flows.Request{Op: flows.OpCompletion, Request: chat.Request{AppID: ids["chat"], User: "u"}}, apperr.CodeAppUnavailable},
		{"bad workflow version id", flows.Request{WorkflowID: "nope", Request: chat.Request{AppID: ids["workflow"], User: "u"}}, apperr.CodeBadRequest},
		{"unknown app", flows.Request{Request: chat.Request{AppID: "8d3c1c9e-0000-4000-8000-000000000000", User: "u"}}, apperr.CodeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.Run(context.Background(), tc.req)
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != tc.code {
				t.Fatalf("got %v, want code %s", err, tc.code)
			}
		})
	}
}

// TestCancelDrains checks that a consumer that goes away after the first
// event can cancel the run and the producer still ends.
func TestCancelDrains(t *testing.T) {
	svc, ids := newService(t)
	run, err := svc.Run(context.Background(), flows.Request{Request: chat.Request{AppID: ids["workflow"], User: "u",
		Inputs: map[string]any{"name": "x"}, Streaming: true}})
	if err != nil {
		t.Fatal(err)
	}
	first := <-run.Events()
	if first.Name != workflow.EventWorkflowStarted {
		t.Fatalf("first event %s", first.Name)
	}
	run.Cancel(errors.New("consumer left"))
	for range run.Events() {
	}
}
