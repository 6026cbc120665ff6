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
