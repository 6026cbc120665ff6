package workflowruns_test

import (
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cluster/clustertest"
	"appkb/internal/run/workflow"
	"appkb/internal/run/workflowruns"
	"appkb/models"
)

const def = `app: {mode: workflow, name: W}
kind: app
version: 0.3.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: q, label: Q, type: text-input, required: true}]}
    - id: t
      data: {type: template-transform, title: T, template: 'got {{ q }}', variables: [{variable: q, value_selector: [start, q]}]}
    - id: end
      data: {type: end, title: End, outputs: [{variable: out, value_selector: [t, output]}]}
    edges:
    - {source: start, sourceHandle: source, target: t}
    - {source: t, sourceHandle: source, target: end}
`

func TestVersionsAndRuns(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	appStore := apps.NewStore(gdb)
	a, err := appStore.Import(ctx, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	b, err := appStore.Import(ctx, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	s := workflowruns.New(gdb)

	v1, err := s.Current(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Current(ctx, a)
	if err != nil || again.ID != v1.ID {
		t.Fatalf("the same text gave versions %s and %v (%v)", v1.ID, again, err)
	}
	vb, err := s.Current(ctx, b)
	if err != nil || vb.ID == v1.ID {
		t.Fatalf("two apps share version %s (%v)", v1.ID, err)
	}
	if _, err := s.ByID(ctx, b.ID, v1.ID); !apperr.Is(err, apperr.CodeNotFound) {
		t.Errorf("another app's version: %v", err)
	}

	eu := models.EndUser{AppID: a.ID, ExternalUserID: "u", SessionID: "u", Type: "service-api"}
	if err := gdb.Create(&eu).Error; err != nil {
		t.Fatal(err)
	}
	e := &workflow.Engine{Store: s.Recorder(workflowruns.RunMeta{EndUserID: eu.ID})}
	res, err := e.Run(ctx, workflow.RunInput{Workflow: v1.Def.Workflow, AppID: a.ID, WorkflowID: v1.ID, Inputs: map[string]any{"q": "x"}}, nil)
	if err != nil || res.Status != workflow.RunSucceeded {
		t.Fatalf("run: %v %+v", err, res)
	}
	run, err := s.Run(ctx, a.ID, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != workflow.RunSucceeded || run.Outputs == nil || *run.Outputs != `{"out":"got x"}` || run.FinishedAt == nil || run.TotalSteps != 3 {
		t.Errorf("stored run %+v", run)
	}
	if _, err := s.Run(ctx, b.ID, res.RunID); !apperr.Is(err, apperr.CodeNotFound) {
		t.Errorf("another app's run: %v", err)
	}
	nodes, err := s.NodeExecutions(ctx, res.RunID)
	if err != nil || len(nodes) != 3 || nodes[0].NodeID != "start" || nodes[2].NodeID != "end" {
		t.Fatalf("node executions %+v (%v)", nodes, err)
	}

	logs, total, err := s.Logs(ctx, a.ID, workflowruns.LogFilter{Keyword: "got x", Page: 1, Limit: 10})
	if err != nil || total != 1 || len(logs) != 1 || logs[0].Version != v1.Label || logs[0].EndUser == nil {
		t.Fatalf("logs %+v total %d (%v)", logs, total, err)
	}
	before := time.Now().Add(-time.Minute)
	if _, total, _ := s.Logs(ctx, a.ID, workflowruns.LogFilter{Before: &before}); total != 0 {
		t.Errorf("runs before a minute ago: %d", total)
	}
	if _, total, _ := s.Logs(ctx, a.ID, workflowruns.LogFilter{Keyword: "%"}); total != 0 {
		t.Errorf("a literal %% matched %d runs", total)
	}
}

func TestCloseInterrupted(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	a, err := apps.NewStore(gdb).Import(ctx, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	store := workflowruns.New(gdb)
	v, err := store.Current(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	runs := []models.WorkflowRun{
		{AppID: a.ID, WorkflowID: v.ID, TaskID: "t1", Status: workflowruns.StatusRunning, Inputs: "{}"},
		{AppID: a.ID, WorkflowID: v.ID, TaskID: "t2", Status: workflow.RunSucceeded, Inputs: "{}"},
	}
	if err := gdb.Create(&runs).Error; err != nil {
		t.Fatal(err)
	}
	n, err := store.CloseInterrupted(ctx, nil)
	if err != nil || n != 1 {
		t.Fatalf("CloseInterrupted = %d, %v; want 1 run closed", n, err)
	}
	tests := []struct {
		id         string
		wantStatus string
		wantError  bool
	}{
		{runs[0].ID, workflow.RunFailed, true},
		{runs[1].ID, workflow.RunSucceeded, false},
	}
	for _, tc := range tests {
		var got models.WorkflowRun
		if err := gdb.Take(&got, "id = ?", tc.id).Error; err != nil {
			t.Fatal(err)
		}
		if got.Status != tc.wantStatus || (got.Error != nil) != tc.wantError || (got.FinishedAt != nil) != tc.wantError {
			t.Errorf("run %s: status %s, error %v, finished %v", tc.id, got.Status, got.Error, got.FinishedAt)
		}
	}
	if n, _ := store.CloseInterrupted(ctx, nil); n != 0 {
		t.Errorf("a second call closed %d runs", n)
	}
}

// A replica that starts closes only the runs of replicas that are gone
// (on PostgreSQL, where several share the database); runs it records
// carry its id. On SQLite it is alone, and every running run is closed.
func TestCloseInterruptedLeavesLiveReplicas(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	a, err := apps.NewStore(gdb).Import(ctx, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	store := workflowruns.New(gdb)
	v, err := store.Current(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	rs := clustertest.Beating(t, gdb, 3)
	live, dead, starting := rs[0], rs[1], rs[2]
	clustertest.Backdate(t, gdb, dead.ID)
	// The live replica's run is recorded through its store, as the engine
	// does.
	liveStore := workflowruns.New(gdb)
	liveStore.SetReplica(live)
	liveRun := &workflow.RunRecord{ID: "9d4c3f55-0000-4000-8000-00000000000a", TaskID: "t-live", WorkflowID: v.ID, AppID: a.ID, CreatedAt: time.Now().Unix()}
	if err := liveStore.Recorder(workflowruns.RunMeta{}).RunStarted(ctx, liveRun); err != nil {
		t.Fatal(err)
	}
	gone := "1f0e2d3c-gone"
	tests := []struct {
		name  string
		id    string
		owner *string
		// closed on a shared database; on SQLite every run is closed.
		closedShared bool
	}{
		{"run of a live replica", liveRun.ID, nil, false},
		{"run of a replica with a stale heartbeat", "", &dead.ID, true},
		{"run of a replica whose row is gone", "", &gone, true},
		{"run of no replica", "", nil, true},
	}
	for i := range tests {
		if tests[i].id != "" {
			continue
		}
		row := models.WorkflowRun{AppID: a.ID, WorkflowID: v.ID, TaskID: tests[i].name, Status: workflowruns.StatusRunning, Inputs: "{}", ReplicaID: tests[i].owner}
		if err := gdb.Create(&row).Error; err != nil {
			t.Fatal(err)
		}
		tests[i].id = row.ID
	}
	if _, err := store.CloseInterrupted(ctx, starting); err != nil {
		t.Fatal(err)
	}
	shared := starting.Shared()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got models.WorkflowRun
			if err := gdb.Take(&got, "id = ?", tc.id).Error; err != nil {
				t.Fatal(err)
			}
			wantClosed := tc.closedShared || !shared
			if closed := got.Status == workflow.RunFailed; closed != wantClosed {
				t.Errorf("status %s (replica %v), want closed %v", got.Status, got.ReplicaID, wantClosed)
			}
			if tc.id == liveRun.ID && (got.ReplicaID == nil || *got.ReplicaID != live.ID) {
				t.Errorf("the recorded run belongs to %v, want %s", got.ReplicaID, live.ID)
			}
		})
	}
}

// TestCurrentFollowsTheText changes an app's definition back and forth:
// each text keeps its version, whether the store remembers the last one
// or reads it afresh, and a version's graph is compiled once.
func TestCurrentFollowsTheText(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	a, err := apps.NewStore(gdb).Import(ctx, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(def, "got {{ q }}", "had {{ q }}", 1)
	s := workflowruns.New(gdb)
	steps := []struct {
		text  string
		class int // steps of one class share a version
	}{
		{def, 0}, {def, 0}, {other, 1}, {def, 0}, {other, 1}, {other, 1},
	}
	ids := map[int]string{}
	for i, step := range steps {
		a.Definition = step.text
		v, err := s.Current(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := workflowruns.New(gdb).Current(ctx, a)
		if err != nil || fresh.ID != v.ID {
			t.Fatalf("step %d: remembered version %s, read afresh %v (%v)", i, v.ID, fresh, err)
		}
		if id, ok := ids[step.class]; ok && id != v.ID || !ok && slices.Contains(slices.Collect(maps.Values(ids)), v.ID) {
			t.Fatalf("step %d: version %s, versions so far %v", i, v.ID, ids)
		}
		ids[step.class] = v.ID
		g1, err := s.Graph(v)
		if err != nil {
			t.Fatal(err)
		}
		if g2, _ := s.Graph(v); g2 != g1 {
			t.Errorf("step %d: the graph of version %s was compiled twice", i, v.ID)
		}
	}
}

// pausingDef is a workflow that pauses at a human-input node after a
// template ran.
const pausingDef = `app: {mode: workflow, name: P}
kind: app
version: 0.6.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: q, label: Q, type: text-input, required: true}]}
    - id: t
      data: {type: template-transform, title: T, template: 'got {{ q }}', variables: [{variable: q, value_selector: [start, q]}]}
    - id: ask
      data: {type: human-input, title: Ask, form_content: "Go?", inputs: [], user_actions: [{id: go, title: Go}]}
    - id: end
      data: {type: end, title: End, outputs: [{variable: out, value_selector: [t, output]}]}
    edges:
    - {source: start, sourceHandle: source, target: t}
    - {source: t, sourceHandle: source, target: ask}
    - {source: ask, sourceHandle: go, target: end}
`

// TestBlockingRunStoresAlike runs the same graphs with a recorder that
// waits for every row (a run someone follows) and one that only queues
// them (a blocking run): once Run and Flush return, both have stored the
// same run, node executions and forms, apart from ids and times. A
// blocking run that pauses stores its run before its form, which names it.
func TestBlockingRunStoresAlike(t *testing.T) {
	tests := []struct {
		name       string
		def        string
		wantStatus string
		wantNodes  int
		wantForms  int64
	}{
		{"succeeds", def, workflow.RunSucceeded, 3, 0},
		{"pauses for a form", pausingDef, workflow.RunPaused, 2, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			gdb := db.OpenTemp(t)
			a, err := apps.NewStore(gdb).Import(ctx, []byte(tc.def))
			if err != nil {
				t.Fatal(err)
			}
			s := workflowruns.New(gdb)
			v, err := s.Current(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			type stored struct {
				run   models.WorkflowRun
				nodes []models.WorkflowNodeExecution
				forms int64
			}
			var got [2]stored
			for i, blocking := range []bool{false, true} {
				rec := s.Recorder(workflowruns.RunMeta{Blocking: blocking})
				e := &workflow.Engine{Store: rec, Forms: rec.Forms()}
				res, err := e.Run(ctx, workflow.RunInput{Workflow: v.Def.Workflow, AppID: a.ID, WorkflowID: v.ID,
					Inputs: map[string]any{"q": "x"}}, nil)
				if err != nil || res.Status != tc.wantStatus {
					t.Fatalf("blocking %v: run %+v, %v", blocking, res, err)
				}
				if err := rec.Flush(ctx); err != nil {
					t.Fatalf("blocking %v: %v", blocking, err)
				}
				if err := gdb.Take(&got[i].run, "id = ?", res.RunID).Error; err != nil {
					t.Fatalf("blocking %v: %v", blocking, err)
				}
				if err := gdb.Where("workflow_run_id = ?", res.RunID).Order("node_index").Find(&got[i].nodes).Error; err != nil {
					t.Fatal(err)
				}
				if err := gdb.Model(&models.HumanInputForm{}).Where("workflow_run_id = ?", res.RunID).Count(&got[i].forms).Error; err != nil {
					t.Fatal(err)
				}
			}
			for i := range got {
				if len(got[i].nodes) != tc.wantNodes || got[i].forms != tc.wantForms || got[i].run.Status != tc.wantStatus {
					t.Fatalf("run %d: status %s, %d node executions, %d forms", i, got[i].run.Status, len(got[i].nodes), got[i].forms)
				}
			}
			// What differs between two runs by nature.
			var runIDs [2]string
			for i := range got {
				runIDs[i] = got[i].run.ID
				r := &got[i].run
				r.ID, r.TaskID, r.ElapsedTime, r.CreatedAt, r.FinishedAt = "", "", 0, time.Time{}, nil
				if r.PauseState != nil { // its elapsed time and clock differ
					r.PauseState = new("a snapshot")
				}
				for k := range got[i].nodes {
					n := &got[i].nodes[k]
					n.ID, n.WorkflowRunID, n.ElapsedTime, n.CreatedAt, n.FinishedAt = "", "", 0, time.Time{}, nil
				}
			}
			for k, what := range []any{got[0].run, got[0].nodes} {
				followed, blocking := alike(what, runIDs[0]), alike([]any{got[1].run, got[1].nodes}[k], runIDs[1])
				if followed != blocking {
					t.Errorf("stored rows differ\n followed %s\n blocking %s", followed, blocking)
				}
			}
		})
	}
}

// alike is rows as JSON, with the run's id (which the start node's
// outputs carry) and the run's timestamp left out.
func alike(rows any, runID string) string {
	b, _ := json.Marshal(rows)
	text := strings.ReplaceAll(string(b), runID, "RUN")
	return timestamps.ReplaceAllString(text, `"sys.timestamp\":0`)
}

var timestamps = regexp.MustCompile(`"sys\.timestamp\\":\d+`)

// TestBlockingRunIsListedWhileItRuns: a blocking run queues its node
// executions, but its own row is stored before its first node runs, as a
// running run, so the app's logs list it (as Dify's do) and a server that
// stops meanwhile leaves it to be closed as interrupted.
func TestBlockingRunIsListedWhileItRuns(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	a, err := apps.NewStore(gdb).Import(ctx, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	s := workflowruns.New(gdb)
	v, err := s.Current(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	rec := s.Recorder(workflowruns.RunMeta{Blocking: true})
	e := &workflow.Engine{Store: rec, Forms: rec.Forms()}
	running := int64(-1)
	res, err := e.Run(ctx, workflow.RunInput{Workflow: v.Def.Workflow, AppID: a.ID, WorkflowID: v.ID,
		Inputs: map[string]any{"q": "x"}}, func(workflow.Event) {
		if running < 0 {
			if err := gdb.Model(&models.WorkflowRun{}).Where("status = ?", workflowruns.StatusRunning).Count(&running).Error; err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil || res.Status != workflow.RunSucceeded {
		t.Fatalf("run %+v, %v", res, err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if running != 1 {
		t.Fatalf("%d running runs stored at the first event, want 1", running)
	}
}
