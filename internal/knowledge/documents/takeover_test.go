package documents

import (
	"context"
	"errors"
	"testing"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/platform/cluster/clustertest"
	"appkb/models"
)

// A job taken over from a replica that only looked dead (its heartbeat
// went stale while it was still working) is finished once, by the new
// owner: the old worker's next write finds the job superseded, and its
// attempt still counts against the document.
func TestTakenOverJobStopsItsOldWorker(t *testing.T) {
	gdb := db.OpenTemp(t)
	ctx := context.Background()
	actor := datasets.Actor{KeyID: "test"}
	technique := datasets.TechniqueEconomy
	ds, err := datasets.NewStore(gdb, nil).CreateDataset(ctx, actor, datasets.CreateParams{Name: "kb", IndexingTechnique: &technique})
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(gdb, nil, t.TempDir())
	out, err := svc.CreateFromText(ctx, actor, ds.ID, "d", "Some text about penguins.", Settings{})
	if err != nil {
		t.Fatal(err)
	}
	rs := clustertest.Beating(t, gdb, 2)
	slow, next := rs[0], rs[1]
	old := &worker{svc: svc, maxBig: 1, replica: slow}
	j, ok, err := old.claimOne(ctx)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if next.Shared() {
		// While its heartbeat is fresh, nobody takes its job.
		if n, err := requeueInterrupted(ctx, gdb, next); err != nil || n != 0 {
			t.Fatalf("requeued %d jobs of a live replica (%v)", n, err)
		}
		clustertest.Backdate(t, gdb, slow.ID)
	}
	if n, err := requeueInterrupted(ctx, gdb, next); err != nil || n != 1 {
		t.Fatalf("requeued %d jobs (%v), want 1", n, err)
	}
	taker := &worker{svc: svc, maxBig: 1, replica: next}
	j2, ok, err := taker.claimOne(ctx)
	if err != nil || !ok {
		t.Fatalf("claim after takeover: %v %v", ok, err)
	}
	steps := []struct {
		name string
		got  any
		want any
	}{
		{"the same document", j2.DocumentID, j.DocumentID},
		{"a new generation", j2.Generation, j.Generation + 1},
		{"the attempt of the old owner still counts", j2.Attempts, 2},
		{"the old worker's write is refused", errors.Is(old.phase(ctx, j, StatusParsing, nil), errStale), true},
		{"the new owner indexes", taker.index(ctx, j2), nil},
		{"the old worker cannot finish it again", errors.Is(old.current(ctx, j, nil), errStale), true},
	}
	for _, s := range steps {
		if s.got != s.want {
			t.Errorf("%s: got %v, want %v", s.name, s.got, s.want)
		}
	}
	if err := old.fail(j, errors.New("late failure")); err != nil {
		t.Fatal(err)
	}
	var doc models.Document
	if err := gdb.Take(&doc, "id = ?", out.Document.ID).Error; err != nil {
		t.Fatal(err)
	}
	if doc.IndexingStatus != StatusCompleted || doc.Error != nil {
		t.Errorf("document %s (%v) after the old worker gave up", doc.IndexingStatus, doc.Error)
	}
	var segments int64
	gdb.Model(&models.Segment{}).Where("document_id = ?", doc.ID).Count(&segments)
	if segments != 1 {
		t.Errorf("%d segments, want 1", segments)
	}
}
