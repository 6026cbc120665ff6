package resumer

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/workflow"
	"appkb/internal/run/workflowruns"
	"appkb/models"
)

func ev(name string) workflow.Event { return workflow.Envelope{Event: name} }

func names(t *testing.T, h *Hub, runID string, after int64) ([]string, int64, bool) {
	t.Helper()
	var out []string
	seq, found, err := h.Follow(context.Background(), runID, after, func(e workflow.Event) error {
		out = append(out, e.Name())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, seq, found
}

func TestHubFollow(t *testing.T) {
	h := NewHub()
	if _, _, found := names(t, h, "r", 0); found {
		t.Fatal("found a segment of an unknown run")
	}

	// A live segment: what was published comes first, the rest as it is
	// published, until the end.
	seg := h.Begin("r")
	seg.Publish(ev("a"))
	done := make(chan []string)
	go func() {
		got, _, _ := names(t, h, "r", 0)
		done <- got
	}()
	seg.Publish(ev("b"))
	seg.End()
	if got := <-done; len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("followed %v", got)
	}

	// An ended segment is still there for a late follower, once.
	got, seq, found := names(t, h, "r", 0)
	if !found || len(got) != 2 {
		t.Errorf("late follower got %v %v", got, found)
	}
	if _, _, found := names(t, h, "r", seq); found {
		t.Error("the same segment was followed twice")
	}
	select {
	case <-h.Next("r", seq):
		t.Error("next segment reported before it began")
	default:
	}
	next := h.Next("r", seq)
	h.Begin("r").Publish(ev("c"))
	select {
	case <-next:
	case <-time.After(time.Second):
		t.Fatal("the next segment was not announced")
	}
}

func TestHubForgets(t *testing.T) {
	h := NewHub()
	h.Retain, h.MaxRetained = 20*time.Millisecond, 2
	for _, id := range []string{"a", "b", "c"} {
		s := h.Begin(id)
		s.Publish(ev("x"))
		s.End()
	}
	if _, _, found := names(t, h, "a", 0); found {
		t.Error("the oldest ended segment was kept beyond MaxRetained")
	}
	if _, _, found := names(t, h, "c", 0); !found {
		t.Error("a recent segment was dropped")
	}
	time.Sleep(60 * time.Millisecond)
	if _, _, found := names(t, h, "c", 0); found {
		t.Error("a segment was kept beyond Retain")
	}
}

// recorder keeps what the hub hands it, for TestHubRecords.
type recorder struct {
	runID  string
	events []string
	ended  int
	log    *[]string
}

func (r *recorder) Add(e workflow.Event) { r.events = append(r.events, e.Name()) }

func (r *recorder) End() {
	r.ended++
	*r.log = append(*r.log, "end "+r.runID)
}

// TestHubRecords checks that a hub with a recorder gives it every segment
// as it begins, every event in order, and the end before followers are
// told the segment ended.
func TestHubRecords(t *testing.T) {
	h := NewHub()
	var order []string
	var recs []*recorder
	h.Record = func(runID string, first bool) SegmentRecorder {
		kind := "resumed"
		if first {
			kind = "new"
		}
		order = append(order, "begin "+kind+" "+runID)
		r := &recorder{runID: runID, log: &order}
		recs = append(recs, r)
		return r
	}
	seg := h.BeginRun("r")
	seg.Publish(ev("a"))
	seg.Publish(ev("b"))
	done := make(chan struct{})
	go func() {
		names(t, h, "r", 0)
		order = append(order, "followed")
		close(done)
	}()
	seg.End()
	<-done
	h.Begin("r").End()
	if len(recs) != 2 || strings.Join(recs[0].events, ",") != "a,b" || recs[0].ended != 1 || len(recs[1].events) != 0 || recs[1].ended != 1 {
		t.Fatalf("recorded %+v", recs)
	}
	if got := strings.Join(order, "; "); got != "begin new r; end r; followed; begin resumed r; end r" {
		t.Errorf("order %s", got)
	}
}

// timeoutApp waits on a form with a timeout branch.
const timeoutApp = `app: {mode: workflow, name: Timeout}
kind: app
version: 0.6.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: ask
      data: {type: human-input, title: Ask, form_content: "Go?", inputs: [], user_actions: [{id: go, title: Go}]}
    - id: went
      data: {type: end, title: Went, outputs: [{variable: how, value_selector: [ask, __action_id]}]}
    - id: late
      data: {type: end, title: Late, outputs: [{variable: how, value_selector: [ask, __action_id]}]}
    edges:
    - {source: start, sourceHandle: source, target: ask}
    - {source: ask, sourceHandle: go, target: went}
    - {source: ask, sourceHandle: __timeout, target: late}
`

func TestExpiredFormTakesTheTimeoutBranch(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	app, err := apps.NewStore(gdb).Import(ctx, []byte(timeoutApp))
	if err != nil {
		t.Fatal(err)
	}
	runs := workflowruns.New(gdb)
	version, err := runs.Current(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	forms := runs.Forms()
	engine := func(meta workflowruns.RunMeta) *workflow.Engine {
		return &workflow.Engine{Store: runs.Recorder(meta), Forms: forms}
	}
	r := &Resumer{Runs: runs, Forms: forms, Engine: engine, Hub: NewHub(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	res, err := engine(workflowruns.RunMeta{}).Run(ctx, workflow.RunInput{Workflow: version.Def.Workflow, AppID: app.ID, WorkflowID: version.ID}, nil)
	if err != nil || res.Status != workflow.RunPaused {
		t.Fatalf("run %v %v", res, err)
	}

	// Not due yet: nothing happens.
	r.ExpireNow(ctx)
	if st := status(t, gdb, res.RunID); st != workflow.RunPaused {
		t.Fatalf("status %s before the form expired", st)
	}
	if err := gdb.Model(&models.HumanInputForm{}).Where("workflow_run_id = ?", res.RunID).
		Update("expires_at", time.Now().Add(-time.Second).UTC()).Error; err != nil {
		t.Fatal(err)
	}
	r.ExpireNow(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for status(t, gdb, res.RunID) != workflow.RunSucceeded {
		if time.Now().After(deadline) {
			t.Fatalf("run still %s", status(t, gdb, res.RunID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var run models.WorkflowRun
	if err := gdb.Where("id = ?", res.RunID).Take(&run).Error; err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(*run.Outputs), &out); err != nil || out["how"] != workflow.TimeoutAction {
		t.Errorf("outputs %v %v", out, err)
	}
	if run.PauseState != nil {
		t.Error("the finished run kept its pause state")
	}
	// The form takes no answer any more.
	var form models.HumanInputForm
	if err := gdb.Where("workflow_run_id = ?", res.RunID).Take(&form).Error; err != nil {
		t.Fatal(err)
	}
	if form.Status != workflow.FormTimeout {
		t.Errorf("form status %s", form.Status)
	}
	if err := r.Submit(ctx, app.ID, form.Token, "u", "go", map[string]any{}); !apperr.Is(err, apperr.CodeFormExpired) {
		t.Errorf("answering an expired form: %v", err)
	}
}

func status(t *testing.T, gdb *gorm.DB, id string) string {
	t.Helper()
	var run models.WorkflowRun
	if err := gdb.Where("id = ?", id).Take(&run).Error; err != nil {
		t.Fatal(err)
	}
	return run.Status
}
