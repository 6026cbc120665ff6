package workflowruns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/platform/groupcommit"
	"appkb/internal/run/workflow"
	"appkb/internal/run/workflowruns"
	"appkb/models"
)

// notes records what the event log announces.
type notes struct {
	mu   sync.Mutex
	sent []workflowruns.EventNote
}

func (n *notes) Publish(_ context.Context, topic string, payload []byte) error {
	if topic != workflowruns.EventsTopic {
		return fmt.Errorf("topic %s", topic)
	}
	note, ok := workflowruns.ParseEventNote(string(payload))
	if !ok {
		return fmt.Errorf("bad note %q", payload)
	}
	n.mu.Lock()
	n.sent = append(n.sent, note)
	n.mu.Unlock()
	return nil
}

func (n *notes) last() workflowruns.EventNote {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.sent) == 0 {
		return workflowruns.EventNote{}
	}
	return n.sent[len(n.sent)-1]
}

// txNotes is notes as a TxPublisher: it records the notes sent within
// a transaction apart, and counts the ones sent outside.
type txNotes struct {
	notes
	outside int
}

func (n *txNotes) Publish(ctx context.Context, topic string, payload []byte) error {
	n.mu.Lock()
	n.outside++
	n.mu.Unlock()
	return n.notes.Publish(ctx, topic, payload)
}

func (n *txNotes) PublishTx(tx *gorm.DB, topic string, payload []byte) error {
	if tx == nil {
		return fmt.Errorf("no transaction")
	}
	return n.notes.Publish(tx.Statement.Context, topic, payload)
}

func TestEventLogSegments(t *testing.T) {
	cases := []struct {
		name string
		// shared writes through a group-commit queue, with a publisher
		// that announces in the writing transaction.
		shared bool
	}{
		{"own transactions", false},
		{"shared commits, announced in them", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { testEventLogSegments(t, c.shared) })
	}
}

func testEventLogSegments(t *testing.T, shared bool) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	var pub interface {
		workflowruns.Publisher
		last() workflowruns.EventNote
	} = &notes{}
	txPub := &txNotes{}
	if shared {
		pub = txPub
	}
	var wroteMu sync.Mutex
	wrote := map[string]int{}
	log := workflowruns.NewEventLog(gdb, pub, func(runID string) {
		wroteMu.Lock()
		wrote[runID]++
		wroteMu.Unlock()
	}, nil)
	if shared {
		log.ShareCommits(groupcommit.New(gdb))
	}

	if _, ok, err := log.Latest(ctx, "r1"); err != nil || ok {
		t.Fatalf("a run without events has a segment (%v)", err)
	}

	// Two segments of r1 and one of r2, numbered by run, in the order
	// they began.
	seg1 := log.BeginRun("r1")
	other := log.BeginRun("r2")
	for i := range 250 {
		seg1.Add(workflow.Envelope{Event: fmt.Sprintf("e%d", i), WorkflowRunID: "r1"})
	}
	seg1.End()
	other.End()
	seg2 := log.Begin("r1")
	if seg1.Segment() != 1 || seg2.Segment() != 2 || other.Segment() != 1 {
		t.Fatalf("segments %d %d %d", seg1.Segment(), seg2.Segment(), other.Segment())
	}
	info, ok, err := log.Latest(ctx, "r1")
	if err != nil || !ok || info.Segment != 2 || info.Ended {
		t.Fatalf("latest %+v %v %v", info, ok, err)
	}
	seg2.Add(workflow.Envelope{Event: workflow.EventWorkflowStarted, WorkflowRunID: "r1"})
	seg2.End()
	seg2.Add(workflow.Envelope{Event: "after the end"})
	info, _, _ = log.Latest(ctx, "r1")
	if !info.Ended || time.Since(info.EndedAt) > time.Minute {
		t.Errorf("ended segment %+v", info)
	}

	// Every event comes back once, in order, a page at a time, then the end.
	var got []string
	var seq int64
	ended := false
	for !ended {
		rows, err := log.After(ctx, "r1", 1, seq)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			t.Fatal("the segment has no end")
		}
		for _, r := range rows {
			if r.Seq <= seq {
				t.Fatalf("seq %d after %d", r.Seq, seq)
			}
			seq = r.Seq
			if r.End {
				ended = true
				break
			}
			var ev workflow.Envelope
			if err := json.Unmarshal(r.Event, &ev); err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.Event)
		}
	}
	if len(got) != 250 || got[0] != "e0" || got[249] != "e249" {
		t.Errorf("segment 1 read back %d events: %v…", len(got), got[:min(3, len(got))])
	}
	rows, err := log.After(ctx, "r1", 2, 0)
	if err != nil || len(rows) != 2 || rows[0].End || !rows[1].End {
		t.Errorf("segment 2 rows %+v (%v)", rows, err)
	}

	// Each batch was announced; the last note names the end of segment 2.
	if n := pub.last(); n.RunID != "r1" || n.Segment != 2 || n.Seq != 2 {
		t.Errorf("last note %+v", n)
	}
	wroteMu.Lock()
	if wrote["r1"] < 2 || wrote["r2"] != 1 {
		t.Errorf("wrote callbacks %v", wrote)
	}
	wroteMu.Unlock()
	if shared && (txPub.outside != 0 || len(txPub.sent) < 3) {
		t.Errorf("%d notes sent in transactions, %d outside", len(txPub.sent), txPub.outside)
	}
}

func TestEventLogPrune(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	app, err := apps.NewStore(gdb).Import(ctx, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	version, err := workflowruns.New(gdb).Current(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	log := workflowruns.NewEventLog(gdb, nil, nil, nil)
	old := time.Now().Add(-2 * time.Hour).UTC()
	runs := []struct {
		id       string
		status   string
		finished *time.Time
		keep     bool
	}{
		{"finished-long-ago", workflow.RunSucceeded, &old, false},
		{"failed-long-ago", workflow.RunFailed, &old, false},
		{"paused", workflowruns.StatusPaused, nil, true},
		{"running", workflowruns.StatusRunning, nil, true},
		{"no-run-row", "", nil, false},
	}
	for _, r := range runs {
		if r.status != "" {
			row := &models.WorkflowRun{ID: r.id, AppID: app.ID, WorkflowID: version.ID, TaskID: r.id, Status: r.status,
				Inputs: "{}", CreatedAt: old, FinishedAt: r.finished}
			if err := gdb.Create(row).Error; err != nil {
				t.Fatal(err)
			}
		}
		seg := log.Begin(r.id)
		seg.Add(workflow.Envelope{Event: "x"})
		seg.End()
	}
	// Nothing is old enough yet: the rows were written just now.
	if n, err := log.Prune(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned %d (%v)", n, err)
	}
	n, err := log.Prune(ctx, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if n != 9 {
		t.Errorf("pruned %d rows, want 9", n)
	}
	for _, r := range runs {
		_, ok, err := log.Latest(ctx, r.id)
		if err != nil {
			t.Fatal(err)
		}
		if ok != r.keep {
			t.Errorf("%s: kept %v, want %v", r.id, ok, r.keep)
		}
	}
}
