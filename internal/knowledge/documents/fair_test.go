package documents

import (
	"context"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
)

// While big documents hold all the workers they may, the next claim skips
// queued big documents for a small one.
func TestClaimKeepsAWorkerForSmallDocuments(t *testing.T) {
	gdb := db.OpenTemp(t)
	dir := t.TempDir()
	actor := datasets.Actor{KeyID: "test"}
	technique := datasets.TechniqueEconomy
	ds, err := datasets.NewStore(gdb, nil).CreateDataset(context.Background(), actor, datasets.CreateParams{Name: "kb", IndexingTechnique: &technique})
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(gdb, nil, dir)
	ctx := context.Background()
	big := strings.Repeat("word ", BigDocument/5+1)
	var ids []string
	for _, text := range []string{big, big, "small"} {
		out, err := svc.CreateFromText(ctx, actor, ds.ID, "d", text, Settings{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.Document.ID)
	}
	w := &worker{svc: svc, maxBig: 1}
	steps := []struct {
		want string
		big  bool
	}{
		{ids[0], true},  // the oldest first
		{ids[2], false}, // one big running: only small ones
	}
	for i, s := range steps {
		j, ok, err := w.claimOne(ctx)
		if err != nil || !ok {
			t.Fatalf("step %d: %v %v", i, ok, err)
		}
		if j.DocumentID != s.want || j.big != s.big {
			t.Fatalf("step %d: claimed %s (big %v), want %s", i, j.DocumentID, j.big, s.want)
		}
	}
	if _, ok, _ := w.claimOne(ctx); ok {
		t.Fatal("a second big document was claimed")
	}
	w.big = 0
	if j, ok, _ := w.claimOne(ctx); !ok || j.DocumentID != ids[1] {
		t.Fatalf("after the big one ended: %v %v", j, ok)
	}
}
