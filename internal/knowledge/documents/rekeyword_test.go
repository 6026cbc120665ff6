package documents_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/textsplit"
)

// TestKeywordRebuild: chunks whose stored keywords an older version
// computed (Chinese as pairs of characters) get their keywords computed
// again when the workers start with a rebuild pending; English chunks are
// left as they are, and the rebuild is marked done.
func TestKeywordRebuild(t *testing.T) {
	textsplit.Keywords("中文", 1) // loads the Chinese dictionary ahead, outside the waits below
	f := newFixture(t, datasets.TechniqueEconomy)
	f.start(t)
	const zh, en = "员工的自行车请停放在地下一层的自行车停车场", "Bicycles are parked in the basement"
	created, err := f.svc.CreateFromText(context.Background(), f.actor, f.dataset, "doc", zh+"\n"+en,
		documents.Settings{ProcessRule: &textsplit.ProcessRule{Mode: "custom", Rules: &textsplit.Rules{
			Segmentation: &textsplit.Segmentation{Separator: `\n`, MaxTokens: 200}}}})
	if err != nil {
		t.Fatal(err)
	}
	f.wait(t, created.Batch)
	// As an older version left them, with the rebuild not yet done.
	old := `["员工","工的"]`
	if err := f.db.Exec(`UPDATE segments SET keywords = ?`, old).Error; err != nil {
		t.Fatal(err)
	}
	if err := f.db.Exec(`UPDATE keyword_rebuilds SET done = FALSE, next_seq = 0`).Error; err != nil {
		t.Fatal(err)
	}
	stop := documents.Start(context.Background(), documents.Config{DB: f.db, DataDir: f.dataDir, Poll: 10 * time.Millisecond, Logger: quiet})
	defer stop()
	for range 500 {
		if f.count(t, `SELECT COUNT(*) FROM keyword_rebuilds WHERE NOT done`) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := f.count(t, `SELECT COUNT(*) FROM keyword_rebuilds WHERE NOT done`); n != 0 {
		t.Fatalf("%d rebuilds still pending", n)
	}
	var rows []struct{ Content, Keywords string }
	if err := f.db.Raw(`SELECT content, keywords FROM segments ORDER BY position`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d chunks", len(rows))
	}
	if rows[0].Content != zh || rows[0].Keywords == old || !strings.Contains(rows[0].Keywords, "自行车") {
		t.Errorf("Chinese chunk: keywords %s", rows[0].Keywords)
	}
	if rows[1].Keywords != old {
		t.Errorf("English chunk: keywords %s, want them left as %s", rows[1].Keywords, old)
	}
}

// TestKeywordRebuildProgress: while a keyword rebuild has chunks of a
// Chinese document left to go through, the batch's indexing status reports
// the document as indexing with the chunks done so far; an English
// document, which the rebuild leaves alone, stays completed; once the
// rebuild is over both are completed with every chunk.
func TestKeywordRebuildProgress(t *testing.T) {
	textsplit.Keywords("中文", 1)
	f := newFixture(t, datasets.TechniqueEconomy)
	stopFirst := documents.Start(context.Background(), documents.Config{DB: f.db, DataDir: f.dataDir, Poll: 10 * time.Millisecond, Logger: quiet})
	rule := &textsplit.ProcessRule{Mode: "custom", Rules: &textsplit.Rules{
		Segmentation: &textsplit.Segmentation{Separator: `\n`, MaxTokens: 200}}}
	ctx := context.Background()
	zh, err := f.svc.CreateFromText(ctx, f.actor, f.dataset, "zh",
		"员工的自行车请停放在地下一层的自行车停车场\nThe English line in between\n差旅费用需要在出差结束后一周内报销", documents.Settings{ProcessRule: rule})
	if err != nil {
		t.Fatal(err)
	}
	f.wait(t, zh.Batch)
	en, err := f.svc.CreateFromText(ctx, f.actor, f.dataset, "en", "Bicycles are parked in the basement\nTravel costs are refunded",
		documents.Settings{ProcessRule: rule})
	if err != nil {
		t.Fatal(err)
	}
	f.wait(t, en.Batch)
	stopFirst()
	var seqs []int64
	if err := f.db.Raw(`SELECT seq FROM segments WHERE document_id = ? ORDER BY position`, zh.Document.ID).Scan(&seqs).Error; err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 3 {
		t.Fatalf("%d chunks, want 3", len(seqs))
	}
	// As after an upgrade: a rebuild recorded over every chunk so far.
	if err := f.db.Exec(`UPDATE keyword_rebuilds SET done = FALSE, next_seq = 0, last_seq = (SELECT MAX(seq) FROM segments)`).Error; err != nil {
		t.Fatal(err)
	}
	status := func(batch string) documents.IndexingStatus {
		t.Helper()
		st, err := f.svc.BatchStatus(ctx, f.actor, f.dataset, batch)
		if err != nil || len(st) != 1 {
			t.Fatalf("status: %v %v", st, err)
		}
		return st[0]
	}
	steps := []struct {
		name      string
		next      int64 // the rebuild's last chunk done; -1: let the workers finish it
		status    string
		completed int
	}{
		{name: "nothing done", next: 0, status: documents.StatusIndexing, completed: 1},
		{name: "first Chinese chunk done", next: seqs[0], status: documents.StatusIndexing, completed: 2},
		{name: "English chunk done too", next: seqs[1], status: documents.StatusIndexing, completed: 2},
		{name: "rebuild over", next: -1, status: documents.StatusCompleted, completed: 3},
	}
	for _, st := range steps {
		if st.next >= 0 {
			if err := f.db.Exec(`UPDATE keyword_rebuilds SET next_seq = ?`, st.next).Error; err != nil {
				t.Fatal(err)
			}
		} else {
			f.start(t)
			for range 500 {
				if f.count(t, `SELECT COUNT(*) FROM keyword_rebuilds WHERE NOT done`) == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		got := status(zh.Batch)
		if got.IndexingStatus != st.status || got.CompletedSegments != st.completed || got.TotalSegments != 3 {
			t.Errorf("%s: Chinese document %s %d/%d, want %s %d/3", st.name, got.IndexingStatus, got.CompletedSegments, got.TotalSegments, st.status, st.completed)
		}
		if st.status == documents.StatusCompleted && got.CompletedAt == nil {
			t.Errorf("%s: completed without completed_at", st.name)
		}
		if e := status(en.Batch); e.IndexingStatus != documents.StatusCompleted || e.CompletedSegments != 2 {
			t.Errorf("%s: English document %s %d/%d, want completed 2/2", st.name, e.IndexingStatus, e.CompletedSegments, e.TotalSegments)
		}
	}
}
