package annotations

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/platform/cluster"
	"appkb/models"
)

// replicaService opens the database at url with a pool of its own and
// builds a Service for a new, registered replica with short timings, as
// one more process would; the test starts it.
func replicaService(t *testing.T, url string) (*Service, *cluster.Replica) {
	t.Helper()
	gdb, err := db.OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(gdb) })
	r := cluster.NewReplica(gdb)
	r.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	r.Heartbeat, r.DeadAfter = 50*time.Millisecond, 400*time.Millisecond
	r.Start(context.Background())
	s := NewService(gdb, nil)
	s.Log, s.Replica = r.Log, r
	t.Cleanup(func() { s.Stop(); r.Stop() })
	return s, r
}

// logJobs records, through triggers, each claim of a job (an attempt
// counted) and each end of one, with the database's clock.
func logJobs(t *testing.T, gdb *gorm.DB) {
	t.Helper()
	for _, stmt := range []string{
		`CREATE TABLE job_log_test (job_id TEXT, app_id TEXT, event TEXT, replica_id TEXT, at TIMESTAMPTZ)`,
		`CREATE FUNCTION log_job() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.attempts > OLD.attempts THEN
				INSERT INTO job_log_test VALUES (NEW.id, NEW.app_id, 'claim', NEW.replica_id, clock_timestamp());
			END IF;
			IF NEW.status IN ('completed', 'error') AND OLD.status NOT IN ('completed', 'error') THEN
				INSERT INTO job_log_test VALUES (NEW.id, NEW.app_id, 'end', NEW.replica_id, clock_timestamp());
			END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER log_job AFTER UPDATE ON annotation_reply_jobs FOR EACH ROW EXECUTE FUNCTION log_job()`,
	} {
		if err := gdb.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
}

// seedJobs makes apps with a few annotations each and a queue of waiting
// jobs per app, switching reply on and off in turn; it returns the jobs
// of each app in the order they must run.
func seedJobs(t *testing.T, gdb *gorm.DB, appCount, perApp int) map[string][]models.AnnotationReplyJob {
	t.Helper()
	ctx := context.Background()
	out := map[string][]models.AnnotationReplyJob{}
	start := time.Now().UTC()
	for i := range appCount {
		app, err := apps.NewStore(gdb).Import(ctx, []byte(fmt.Sprintf(appYAML, fmt.Sprintf("app%d", i))))
		if err != nil {
			t.Fatal(err)
		}
		for q := range 3 {
			if err := gdb.Create(&models.Annotation{AppID: app.ID, Question: fmt.Sprintf("q%d", q), Answer: "a"}).Error; err != nil {
				t.Fatal(err)
			}
		}
		for k := range perApp {
			action := ActionEnable
			if k%2 == 1 {
				action = ActionDisable
			}
			job := models.AnnotationReplyJob{AppID: app.ID, Action: action, Status: models.JobWaiting,
				EmbeddingProviderName: "appkb", EmbeddingModelName: "builtin", ScoreThreshold: 0.5,
				CreatedAt: start.Add(time.Duration(k) * time.Millisecond)}
			if err := gdb.Create(&job).Error; err != nil {
				t.Fatal(err)
			}
			out[app.ID] = append(out[app.ID], job)
		}
	}
	return out
}

// waitJobsDone waits until no job is waiting or processing.
func waitJobsDone(t *testing.T, gdb *gorm.DB, where string, args ...any) {
	t.Helper()
	for range 500 {
		var n int64
		if err := gdb.Model(&models.AnnotationReplyJob{}).Where("status IN ?", []string{models.JobWaiting, models.JobProcessing}).
			Where(where, args...).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("jobs did not finish")
}

// Two replicas run the same queues: every job is claimed once, ends
// completed, and one app's jobs still run one at a time in order.
func TestJobsClaimedOnceAcrossReplicas(t *testing.T) {
	url := db.TempURL(t)
	a, _ := replicaService(t, url)
	b, _ := replicaService(t, url)
	logJobs(t, a.db)
	jobs := seedJobs(t, a.db, 4, 6)
	// Both replicas look for work at once.
	a.Start(context.Background())
	b.Start(context.Background())
	waitJobsDone(t, a.db, "1 = 1")

	type event struct {
		JobID, AppID, Event string
		ReplicaID           *string
		At                  time.Time
	}
	var log []event
	if err := a.db.Raw(`SELECT job_id, app_id, event, replica_id, at FROM job_log_test ORDER BY at`).Scan(&log).Error; err != nil {
		t.Fatal(err)
	}
	claims := map[string]int{}
	for _, e := range log {
		if e.Event == "claim" {
			claims[e.JobID]++
			if e.ReplicaID == nil {
				t.Errorf("job %s claimed by no replica", e.JobID)
			}
		}
	}
	for appID, list := range jobs {
		// The app's log must read claim, end, claim, end… in job order.
		var seq []string
		for _, e := range log {
			if e.AppID == appID {
				seq = append(seq, e.Event+" "+e.JobID)
			}
		}
		var want []string
		for _, j := range list {
			want = append(want, "claim "+j.ID, "end "+j.ID)
			if claims[j.ID] != 1 {
				t.Errorf("job %s claimed %d times", j.ID, claims[j.ID])
			}
			var got models.AnnotationReplyJob
			if err := a.db.Take(&got, "id = ?", j.ID).Error; err != nil {
				t.Fatal(err)
			}
			if got.Status != models.JobCompleted || got.Attempts != 1 {
				t.Errorf("job %s: %s after %d attempts (%s)", j.ID, got.Status, got.Attempts, got.ErrorMsg)
			}
		}
		if fmt.Sprint(seq) != fmt.Sprint(want) {
			t.Errorf("app %s ran\n%v\nwant\n%v", appID, seq, want)
		}
	}
}

// A job left processing by a replica whose heartbeat stopped is run again
// by a live replica once the heartbeat is stale; a job a live replica is
// processing is left to it.
func TestJobOfDeadReplicaIsResumed(t *testing.T) {
	url := db.TempURL(t)
	s, _ := replicaService(t, url)
	jobs := seedJobs(t, s.db, 2, 1)
	ctx := context.Background()
	dead := cluster.NewReplica(s.db)
	dead.DeadAfter = 400 * time.Millisecond
	if err := dead.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	live := cluster.NewReplica(s.db)
	live.Log, live.Heartbeat = s.Log, 50*time.Millisecond
	live.Start(ctx)
	t.Cleanup(live.Stop)
	var orphan, owned models.AnnotationReplyJob
	owners := []string{dead.ID, live.ID}
	i := 0
	for _, list := range jobs {
		if err := s.db.Exec(`UPDATE annotation_reply_jobs SET status = 'processing', attempts = 1, replica_id = ? WHERE id = ?`, owners[i], list[0].ID).Error; err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			orphan = list[0]
		} else {
			owned = list[0]
		}
		i++
	}
	started := time.Now()
	s.Start(ctx)
	waitJobsDone(t, s.db, "id = ?", orphan.ID)
	if waited := time.Since(started); waited < 200*time.Millisecond {
		t.Errorf("resumed after %s, while the owner's heartbeat was still fresh", waited)
	}
	tests := []struct {
		id, status, owner string
		attempts          int
	}{
		{orphan.ID, models.JobCompleted, s.Replica.ID, 2},
		{owned.ID, models.JobProcessing, live.ID, 1},
	}
	time.Sleep(200 * time.Millisecond) // a few more sweeps
	for _, tc := range tests {
		var got struct {
			Status    string
			Attempts  int
			ReplicaID string
		}
		if err := s.db.Raw(`SELECT status, attempts, replica_id FROM annotation_reply_jobs WHERE id = ?`, tc.id).Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		if got.Status != tc.status || got.Attempts != tc.attempts || got.ReplicaID != tc.owner {
			t.Errorf("job %s: %+v, want %s after %d attempts by %s", tc.id, got, tc.status, tc.attempts, tc.owner)
		}
	}
}
