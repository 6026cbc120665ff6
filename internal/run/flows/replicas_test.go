package flows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/conversation/files"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cluster"
	"appkb/internal/run/chat"
	"appkb/internal/run/flows"
	"appkb/internal/run/workflow"
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

// spinApp is a workflow whose code node spins until it is interrupted.
const spinApp = `app: {mode: workflow, name: Spin}
kind: app
version: 0.3.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: spin
      data: {type: code, title: Spin, code_language: javascript, code: 'function main() { while (true) {} }', outputs: {}}
    - id: end
      data: {type: end, title: End, outputs: []}
    edges:
    - {source: start, sourceHandle: source, target: spin}
    - {source: spin, sourceHandle: source, target: end}
`

// slowModel streams a word every pause until its context ends.
type slowModel struct{ pause time.Duration }

func (m slowModel) Chat(ctx context.Context, req llm.ChatRequest) (*llm.ChatResponse, error) {
	return &llm.ChatResponse{Content: "word"}, nil
}

func (m slowModel) Stream(ctx context.Context, req llm.ChatRequest, onChunk func(llm.Chunk) error) (*llm.ChatResponse, error) {
	var said strings.Builder
	for range 400 {
		select {
		case <-time.After(m.pause):
		case <-ctx.Done():
			return nil, apperr.Wrap(ctx.Err(), 400, apperr.CodeCompletionRequestError, "cancelled")
		}
		said.WriteString("word ")
		if err := onChunk(llm.Chunk{Delta: "word "}); err != nil {
			return nil, err
		}
	}
	return &llm.ChatResponse{Content: said.String()}, nil
}

// slowModels serves slowModel for every provider.
type slowModels struct{}

func (slowModels) Chat(provider, model string) (llm.ChatModel, error) {
	return slowModel{pause: 20 * time.Millisecond}, nil
}

func (slowModels) Backend(string) (string, error) { return llm.BackendBuiltin, nil }

// newReplicas builds two replicas on one fresh PostgreSQL database: each
// with its own connections, bus, chat runtime (task registry) and flows
// service. It skips without APPKB_TEST_DATABASE_URL.
func newReplicas(t *testing.T) (a, b *flows.Service, ids map[string]string, events func(runID string) []int64) {
	t.Helper()
	url := db.TempURL(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var svcs []*flows.Service
	for i := range 2 {
		gdb, err := db.OpenPostgres(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close(gdb) })
		if i == 0 {
			store := apps.NewStore(gdb)
			ids = map[string]string{}
			for name, text := range map[string]string{"chat": chatApp, "workflow": workflowApp, "approval": approvalApp, "spin": spinApp, "completion": completionApp} {
				app, err := store.Import(context.Background(), []byte(text))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				ids[name] = app.ID
			}
			events = func(runID string) []int64 {
				var segs []int64
				if err := gdb.Raw("SELECT DISTINCT segment FROM run_events WHERE run_id = ? ORDER BY segment", runID).Scan(&segs).Error; err != nil {
					t.Fatal(err)
				}
				return segs
			}
		}
		bus := cluster.NewBus(gdb, log)
		bus.Start(context.Background())
		t.Cleanup(bus.Stop)
		uploads := files.NewStore(gdb, t.TempDir())
		chatSvc := chat.New(chat.Config{DB: gdb, Logger: log, Models: slowModels{}, ResolveFiles: flows.AttachedFiles(uploads)})
		svc := flows.New(flows.Config{DB: gdb, Chat: chatSvc, Files: uploads, Logger: log, Bus: bus})
		svc.Start(context.Background())
		t.Cleanup(svc.Stop)
		svcs = append(svcs, svc)
	}
	return svcs[0], svcs[1], ids, events
}

// frame is the JSON payload of an event, as a client receives it.
func frame(t *testing.T, ev flows.Event) map[string]any {
	t.Helper()
	raw, err := json.Marshal(ev.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// collect reads a run's events to the end, within limit.
func collect(t *testing.T, run *flows.Run, limit time.Duration) []flows.Event {
	t.Helper()
	var out []flows.Event
	timeout := time.After(limit)
	for {
		select {
		case ev, ok := <-run.Events():
			if !ok {
				if err := run.Err(); err != nil {
					t.Fatalf("run ended with %v", err)
				}
				return out
			}
			out = append(out, ev)
		case <-timeout:
			run.Cancel(errors.New("test timeout"))
			t.Fatalf("the run did not end within %s; %d events so far", limit, len(out))
		}
	}
}

func eventNames(evs []flows.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Name)
	}
	return out
}

// TestReplicasStop starts streams on replica A and stops them through
// replica B: only the user who started a chat or completion may stop it,
// a workflow task stops whoever asks, and the checks refuse on B what
// they refuse on A.
func TestReplicasStop(t *testing.T) {
	a, b, ids, _ := newReplicas(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		start flows.Request
		// stop asks B to stop the task as user.
		stop     func(user, task string) error
		wrongApp func(task string) error
		// another user's stop is ignored (chats and completions).
		ownerOnly bool
		// firstLive is the event after which the task is known to run.
		firstLive func(flows.Event) bool
		lastEvent string
	}{
		{
			name:  "chat",
			start: flows.Request{Op: flows.OpChat, Request: chat.Request{AppID: ids["chat"], User: "alice", Query: "talk", Streaming: true}},
			stop:  func(user, task string) error { return b.StopChat(ctx, ids["chat"], user, task) },
			wrongApp: func(task string) error {
				return expectCode(b.StopChat(ctx, ids["workflow"], "alice", task), apperr.CodeNotChatApp)
			},
			ownerOnly: true,
			firstLive: func(ev flows.Event) bool { return ev.Name == chat.EventMessage },
			lastEvent: chat.EventMessageEnd,
		},
		{
			name:  "completion",
			start: flows.Request{Op: flows.OpCompletion, Request: chat.Request{AppID: ids["completion"], User: "alice", Inputs: map[string]any{"topic": "tea"}, Streaming: true}},
			stop:  func(user, task string) error { return b.StopCompletion(ctx, ids["completion"], user, task) },
			wrongApp: func(task string) error {
				return expectCode(b.StopCompletion(ctx, ids["chat"], "alice", task), apperr.CodeAppUnavailable)
			},
			ownerOnly: true,
			firstLive: func(ev flows.Event) bool { return ev.Name == chat.EventMessage },
			lastEvent: chat.EventMessageEnd,
		},
		{
			name:  "workflow",
			start: flows.Request{Op: flows.OpWorkflow, Request: chat.Request{AppID: ids["spin"], User: "alice", Streaming: true}},
			stop:  func(user, task string) error { return b.StopWorkflow(ctx, ids["spin"], user, task) },
			wrongApp: func(task string) error {
				return expectCode(b.StopWorkflow(ctx, ids["chat"], "alice", task), apperr.CodeNotWorkflowApp)
			},
			firstLive: func(ev flows.Event) bool {
				data, _ := frame(t, ev)["data"].(map[string]any)
				return ev.Name == workflow.EventNodeStarted && data["node_id"] == "spin"
			},
			lastEvent: workflow.EventWorkflowFinished,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run, err := a.Run(ctx, tc.start)
			if err != nil {
				t.Fatal(err)
			}
			for live := false; !live; {
				select {
				case ev, ok := <-run.Events():
					if !ok {
						t.Fatal("the run ended before it was stopped")
					}
					live = tc.firstLive(ev)
				case <-time.After(5 * time.Second):
					t.Fatal("the run did not start")
				}
			}
			if err := tc.wrongApp(run.TaskID); err != nil {
				t.Error(err)
			}
			if tc.ownerOnly {
				// Someone else's stop, through B, leaves the stream running.
				if err := tc.stop("mallory", run.TaskID); err != nil {
					t.Fatal(err)
				}
				for deadline := time.After(300 * time.Millisecond); deadline != nil; {
					select {
					case _, ok := <-run.Events():
						if !ok {
							t.Fatal("another user's stop ended the stream")
						}
					case <-deadline:
						deadline = nil
					}
				}
			}
			started := time.Now()
			who := "alice"
			if !tc.ownerOnly {
				who = "bob"
			}
			if err := tc.stop(who, run.TaskID); err != nil {
				t.Fatal(err)
			}
			rest := collect(t, run, 5*time.Second)
			if d := time.Since(started); d > 3*time.Second {
				t.Errorf("the stream took %s to stop", d)
			}
			if len(rest) == 0 || rest[len(rest)-1].Name != tc.lastEvent {
				t.Fatalf("stopped stream ended with %v", eventNames(rest))
			}
			if tc.lastEvent == workflow.EventWorkflowFinished {
				if status := frame(t, rest[len(rest)-1])["data"].(map[string]any)["status"]; status != workflow.RunStopped {
					t.Errorf("workflow finished %v", status)
				}
			}
			// A stop of a task nobody runs succeeds quietly.
			if err := tc.stop("alice", "no-such-task"); err != nil {
				t.Errorf("stop of an unknown task: %v", err)
			}
		})
	}
}

// expectCode is nil when err is an apperr with code, and says what it
// was otherwise.
func expectCode(err error, code string) error {
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Code == code {
		return nil
	}
	return fmt.Errorf("got %v, want code %s", err, code)
}

// TestReplicasFollow runs a workflow on A and follows it from B: B sees
// the same events, in order, once each, ending with workflow_finished.
func TestReplicasFollow(t *testing.T) {
	a, b, ids, segments := newReplicas(t)
	ctx := context.Background()
	run, err := a.Workflow(ctx, flows.Request{Request: chat.Request{AppID: ids["workflow"], User: "alice", Inputs: map[string]any{"name": "Ada"}, Streaming: true}})
	if err != nil {
		t.Fatal(err)
	}
	onA := collect(t, run, 5*time.Second)
	runID, _ := frame(t, onA[0])["workflow_run_id"].(string)
	if runID == "" || onA[len(onA)-1].Name != workflow.EventWorkflowFinished {
		t.Fatalf("run on A: %v", eventNames(onA))
	}

	tests := []struct {
		name string
		user string
		want error
	}{
		{"owner", "alice", nil},
		{"someone else", "bob", apperr.NotFound("")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			follow, err := b.Follow(ctx, flows.FollowRequest{AppID: ids["workflow"], RunID: runID, User: tc.user})
			if tc.want != nil {
				var ae *apperr.Error
				if !errors.As(err, &ae) || ae.Code != apperr.CodeNotFound {
					t.Fatalf("got %v, want not found", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			onB := collect(t, follow, 5*time.Second)
			if len(onB) != len(onA) {
				t.Fatalf("B saw %v, A streamed %v", eventNames(onB), eventNames(onA))
			}
			for i := range onA {
				wantJSON, _ := json.Marshal(onA[i].Payload)
				gotJSON, _ := json.Marshal(onB[i].Payload)
				if string(wantJSON) != string(gotJSON) {
					t.Errorf("event %d: B got %s, A streamed %s", i, gotJSON, wantJSON)
				}
			}
		})
	}
	if segs := segments(runID); len(segs) != 1 {
		t.Errorf("segments %v", segs)
	}
	if n := flows.WaitingRuns(b); n != 0 {
		t.Errorf("%d runs still have followers waiting on B", n)
	}
}

// TestReplicasResume pauses a run on A, follows it from B and answers its
// form on both replicas at once: one answer wins, the run resumes once,
// and the follower on B sees the pause, then the rest to the end.
func TestReplicasResume(t *testing.T) {
	a, b, ids, segments := newReplicas(t)
	ctx := context.Background()
	app := ids["approval"]
	run, err := a.Workflow(ctx, flows.Request{Request: chat.Request{AppID: app, User: "ann", Inputs: map[string]any{"doc": "the plan"}, Streaming: true}})
	if err != nil {
		t.Fatal(err)
	}
	onA := collect(t, run, 5*time.Second)
	var token, runID string
	for _, ev := range onA {
		if ev.Name == workflow.EventHumanInputRequired {
			f := frame(t, ev)
			runID, _ = f["workflow_run_id"].(string)
			token, _ = f["data"].(map[string]any)["form_token"].(string)
		}
	}
	if token == "" || onA[len(onA)-1].Name != workflow.EventWorkflowPaused {
		t.Fatalf("run on A: %v", eventNames(onA))
	}

	// B follows past the pause.
	follow, err := b.Follow(ctx, flows.FollowRequest{AppID: app, RunID: runID, User: "ann", ContinueOnPause: true})
	if err != nil {
		t.Fatal(err)
	}
	// It sees the paused segment first (it ended moments ago).
	var onB []flows.Event
	for len(onB) == 0 || onB[len(onB)-1].Name != workflow.EventWorkflowPaused {
		select {
		case ev, ok := <-follow.Events():
			if !ok {
				t.Fatalf("the follow ended at the pause: %v", eventNames(onB))
			}
			onB = append(onB, ev)
		case <-time.After(5 * time.Second):
			t.Fatalf("no pause within 5s: %v", eventNames(onB))
		}
	}
	followed := make(chan []flows.Event, 1)
	go func() {
		var out []flows.Event
		for ev := range follow.Events() {
			out = append(out, ev)
		}
		followed <- out
	}()

	// Both replicas answer at once.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	gate := make(chan struct{})
	for i, svc := range []*flows.Service{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			errs[i] = svc.SubmitForm(ctx, app, token, "ann", "approve", map[string]any{"comment": "ship it"})
		}()
	}
	close(gate)
	wg.Wait()
	var wins int
	for _, err := range errs {
		var ae *apperr.Error
		switch {
		case err == nil:
			wins++
		case errors.As(err, &ae) && ae.Status == 412 && ae.Code == apperr.CodeFormSubmitted:
		default:
			t.Errorf("losing answer: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d answers won: %v", wins, errs)
	}

	select {
	case rest := <-followed:
		onB = append(onB, rest...)
	case <-time.After(10 * time.Second):
		follow.Cancel(errors.New("test timeout"))
		t.Fatal("the follower on B did not see the end")
	}
	names := eventNames(onB)
	count := map[string]int{}
	for _, n := range names {
		count[n]++
	}
	if names[len(names)-1] != workflow.EventWorkflowFinished || count[workflow.EventWorkflowFinished] != 1 ||
		count[workflow.EventWorkflowPaused] != 1 || count[workflow.EventWorkflowStarted] != 2 {
		t.Errorf("B followed %v", names)
	}
	if !containsInOrder(names, []string{workflow.EventWorkflowPaused, workflow.EventWorkflowStarted, workflow.EventWorkflowFinished}) {
		t.Errorf("B followed %v", names)
	}
	end := frame(t, onB[len(onB)-1])
	data, _ := end["data"].(map[string]any)
	outputs, _ := data["outputs"].(map[string]any)
	if data["status"] != "succeeded" || outputs["verdict"] != "approve" || outputs["comment"] != "ship it" {
		t.Errorf("finished with %v", data)
	}
	// Resumed once: the start and one resumption.
	if segs := segments(runID); len(segs) != 2 {
		t.Errorf("segments %v", segs)
	}
	// A follower on A, once it is over, gets the end alone.
	late, err := a.Follow(ctx, flows.FollowRequest{AppID: app, RunID: runID, User: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	got := eventNames(collect(t, late, 5*time.Second))
	finished := 0
	for _, n := range got {
		if n == workflow.EventWorkflowFinished {
			finished++
		}
	}
	if len(got) == 0 || got[len(got)-1] != workflow.EventWorkflowFinished || finished != 1 || strings.Contains(strings.Join(got, ","), workflow.EventWorkflowPaused) {
		t.Errorf("late follower on A got %v", got)
	}
	if n := flows.WaitingRuns(a) + flows.WaitingRuns(b); n != 0 {
		t.Errorf("%d runs still have followers waiting", n)
	}
}

// TestFollowPastPause follows a paused run with ContinueOnPause on one
// server (either engine): the pause is shown once, however long the form
// waits, then the resumed run to its end.
func TestFollowPastPause(t *testing.T) {
	svc, ids := newService(t)
	ctx := context.Background()
	app := ids["approval"]
	run, err := svc.Workflow(ctx, flows.Request{Request: chat.Request{AppID: app, User: "ann", Inputs: map[string]any{"doc": "d"}, Streaming: true}})
	if err != nil {
		t.Fatal(err)
	}
	var token, runID string
	for _, ev := range collect(t, run, 5*time.Second) {
		if ev.Name == workflow.EventHumanInputRequired {
			f := frame(t, ev)
			runID, _ = f["workflow_run_id"].(string)
			token, _ = f["data"].(map[string]any)["form_token"].(string)
		}
	}
	follow, err := svc.Follow(ctx, flows.FollowRequest{AppID: app, RunID: runID, User: "ann", ContinueOnPause: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	// The form waits a while: longer than the followers' polls.
	for wait := time.After(2500 * time.Millisecond); wait != nil; {
		select {
		case ev := <-follow.Events():
			got = append(got, ev.Name)
		case <-wait:
			wait = nil
		}
	}
	if err := svc.SubmitForm(ctx, app, token, "ann", "approve", map[string]any{"comment": "ok"}); err != nil {
		t.Fatal(err)
	}
	got = append(got, eventNames(collect(t, follow, 5*time.Second))...)
	paused := 0
	for _, n := range got {
		if n == workflow.EventWorkflowPaused {
			paused++
		}
	}
	if paused != 1 || got[len(got)-1] != workflow.EventWorkflowFinished {
		t.Errorf("followed %v", got)
	}
}
