package documents_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/platform/cluster"
)

// replicaDB opens the PostgreSQL database at url as one more replica
// would: its own connection pool.
func replicaDB(t *testing.T, url string) *gorm.DB {
	t.Helper()
	gdb, err := db.OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(gdb) })
	return gdb
}

// startReplica registers a replica with short timings and starts
// indexing workers for it.
func startReplica(t *testing.T, gdb *gorm.DB, dataDir string) *cluster.Replica {
	t.Helper()
	r := cluster.NewReplica(gdb)
	r.Log, r.Heartbeat, r.DeadAfter = quiet, 50*time.Millisecond, 400*time.Millisecond
	r.Start(context.Background())
	stop := documents.Start(context.Background(), documents.Config{DB: gdb, DataDir: dataDir, Workers: 4,
		Poll: 10 * time.Millisecond, Logger: quiet, Replica: r})
	t.Cleanup(func() { stop(); r.Stop() })
	return r
}

// logTransitions records, through triggers, every claim of a job (with
// the claiming replica) and every document that reaches completed.
func logTransitions(t *testing.T, gdb *gorm.DB) {
	t.Helper()
	for _, stmt := range []string{
		`CREATE TABLE claims_test (document_id TEXT, replica_id TEXT)`,
		`CREATE TABLE completions_test (document_id TEXT)`,
		`CREATE FUNCTION log_claim() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO claims_test VALUES (NEW.document_id, NEW.replica_id); RETURN NEW; END $$`,
		`CREATE TRIGGER log_claim AFTER UPDATE ON indexing_jobs FOR EACH ROW
		WHEN (NEW.state = 'running' AND NEW.attempts > OLD.attempts) EXECUTE FUNCTION log_claim()`,
		`CREATE FUNCTION log_completion() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO completions_test VALUES (NEW.id); RETURN NEW; END $$`,
		`CREATE TRIGGER log_completion AFTER UPDATE ON documents FOR EACH ROW
		WHEN (NEW.indexing_status = 'completed' AND NEW.completed_at IS DISTINCT FROM OLD.completed_at) EXECUTE FUNCTION log_completion()`,
	} {
		if err := gdb.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
}

// Two replicas poll one queue: every document is claimed, indexed and
// completed exactly once, and its chunks are written once.
func TestTwoReplicasIndexEachDocumentOnce(t *testing.T) {
	url := db.TempURL(t)
	a, b := replicaDB(t, url), replicaDB(t, url)
	logTransitions(t, a)
	dir := t.TempDir() // one store of files for both (uploads are shared)
	f := fixtureOn(t, a, dir, datasets.TechniqueEconomy)
	const docs = 60
	var batches []string
	for i := range docs {
		out, err := f.svc.CreateFromText(context.Background(), f.actor, f.dataset, fmt.Sprintf("doc %d", i), sample, documents.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, out.Batch)
	}
	ra, rb := startReplica(t, a, dir), startReplica(t, b, dir)
	for _, batch := range batches {
		if st := f.wait(t, batch)[0]; st.IndexingStatus != documents.StatusCompleted {
			t.Fatalf("batch %s: %+v", batch, st)
		}
	}
	checks := []struct {
		name  string
		query string
		want  int
	}{
		{"documents claimed more than once", `SELECT COUNT(*) FROM (SELECT document_id FROM claims_test GROUP BY document_id HAVING COUNT(*) > 1) x`, 0},
		{"claims", `SELECT COUNT(*) FROM claims_test`, docs},
		{"documents completed more than once", `SELECT COUNT(*) FROM (SELECT document_id FROM completions_test GROUP BY document_id HAVING COUNT(*) > 1) x`, 0},
		{"completions", `SELECT COUNT(*) FROM completions_test`, docs},
		{"claims by no replica", `SELECT COUNT(*) FROM claims_test WHERE replica_id IS NULL OR replica_id NOT IN ('` + ra.ID + `', '` + rb.ID + `')`, 0},
		{"documents with duplicate chunks", `SELECT COUNT(*) FROM (SELECT document_id FROM segments GROUP BY document_id, position HAVING COUNT(*) > 1) x`, 0},
		{"jobs left", `SELECT COUNT(*) FROM indexing_jobs`, 0},
	}
	for _, c := range checks {
		if n := f.count(t, c.query); n != c.want {
			t.Errorf("%s: %d, want %d", c.name, n, c.want)
		}
	}
	t.Logf("claims by replica A: %d, by B: %d",
		f.count(t, `SELECT COUNT(*) FROM claims_test WHERE replica_id = ?`, ra.ID),
		f.count(t, `SELECT COUNT(*) FROM claims_test WHERE replica_id = ?`, rb.ID))
}

// A replica claims a job and dies (its heartbeat stops): the other one,
// already running, does not take the job at once (the owner might only
// be slow) but does once the heartbeat is stale, and finishes it. A
// running job of a live replica is left alone.
func TestJobOfDeadReplicaIsTakenOver(t *testing.T) {
	url := db.TempURL(t)
	a, b := replicaDB(t, url), replicaDB(t, url)
	logTransitions(t, a)
	dir := t.TempDir()
	f := fixtureOn(t, a, dir, datasets.TechniqueEconomy)
	ctx := context.Background()
	orphan, err := f.svc.CreateFromText(ctx, f.actor, f.dataset, "orphan", sample, documents.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	owned, err := f.svc.CreateFromText(ctx, f.actor, f.dataset, "owned", sample, documents.Settings{})
	if err != nil {
		t.Fatal(err)
	}

	// Replica A claimed the first job and died; a live replica L (with
	// no workers here) claimed the second one.
	dead := cluster.NewReplica(a)
	dead.DeadAfter = 400 * time.Millisecond
	if err := dead.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	live := cluster.NewReplica(a)
	live.Log, live.Heartbeat = quiet, 50*time.Millisecond
	live.Start(ctx)
	t.Cleanup(live.Stop)
	for id, owner := range map[string]string{orphan.Document.ID: dead.ID, owned.Document.ID: live.ID} {
		if err := a.Exec(`UPDATE indexing_jobs SET state = 'running', attempts = 1, replica_id = ? WHERE document_id = ?`, owner, id).Error; err != nil {
			t.Fatal(err)
		}
	}
	started := time.Now()
	startReplica(t, b, dir)

	if st := f.wait(t, orphan.Batch)[0]; st.IndexingStatus != documents.StatusCompleted {
		t.Fatalf("orphaned job: %+v", st)
	}
	if waited := time.Since(started); waited < 200*time.Millisecond {
		t.Errorf("taken over after %s, while the owner's heartbeat was still fresh", waited)
	}
	if n := f.count(t, `SELECT COUNT(*) FROM completions_test WHERE document_id = ?`, orphan.Document.ID); n != 1 {
		t.Errorf("orphaned document completed %d times", n)
	}
	time.Sleep(300 * time.Millisecond) // several takeover rounds
	var state, owner string
	if err := a.Raw(`SELECT state, replica_id FROM indexing_jobs WHERE document_id = ?`, owned.Document.ID).Row().Scan(&state, &owner); err != nil {
		t.Fatal(err)
	}
	if state != "running" || owner != live.ID {
		t.Errorf("the live replica's job is %s under %s", state, owner)
	}
}
