package cluster_test

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/platform/cluster"
	"appkb/internal/platform/cluster/clustertest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newReplica(gdb *gorm.DB) *cluster.Replica {
	r := cluster.NewReplica(gdb)
	r.Log = quiet
	r.Heartbeat = 20 * time.Millisecond
	r.DeadAfter = time.Second
	return r
}

func TestRegistry(t *testing.T) {
	ctx := context.Background()
	gdb := db.OpenTemp(t)
	live, dead := newReplica(gdb), newReplica(gdb)
	live.Start(ctx)
	t.Cleanup(live.Stop)
	if err := dead.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	clustertest.Backdate(t, gdb, dead.ID)

	// Rows owned by: the live replica, the dead one, one whose row is gone,
	// and no one.
	if err := gdb.Exec(`CREATE TABLE owned_test (id TEXT PRIMARY KEY, replica_id TEXT)`).Error; err != nil {
		t.Fatal(err)
	}
	for id, owner := range map[string]any{"live": live.ID, "dead": dead.ID, "gone": "3b0f2a8e-gone", "none": nil} {
		if err := gdb.Exec(`INSERT INTO owned_test VALUES (?, ?)`, id, owner).Error; err != nil {
			t.Fatal(err)
		}
	}
	pick := func(t *testing.T, cond any) []string {
		t.Helper()
		var ids []string
		if err := gdb.Raw(`SELECT id FROM owned_test WHERE ?`, cond).Scan(&ids).Error; err != nil {
			t.Fatal(err)
		}
		sort.Strings(ids)
		return ids
	}
	orphans := []string{"dead", "gone", "none"}
	interrupted := orphans
	if !live.Shared() { // SQLite: alone, so all of it
		interrupted = []string{"dead", "gone", "live", "none"}
	}
	var none *cluster.Replica

	tests := []struct {
		name string
		got  func(t *testing.T) any
		want any
	}{
		{"a started replica is alive", func(t *testing.T) any { ok, _ := live.Alive(ctx, live.ID); return ok }, true},
		{"a stale heartbeat is dead", func(t *testing.T) any { ok, _ := live.Alive(ctx, dead.ID); return ok }, false},
		{"an unknown id is dead", func(t *testing.T) any { ok, _ := live.Alive(ctx, "nobody"); return ok }, false},
		{"Dead lists the stale one only", func(t *testing.T) any {
			rows, err := live.Dead(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range rows {
				ids = append(ids, r.ID)
			}
			return ids
		}, []string{dead.ID}},
		{"Orphaned: dead, gone or no owner", func(t *testing.T) any { return pick(t, live.Orphaned("replica_id")) }, orphans},
		{"Interrupted: orphans when shared, everything when alone", func(t *testing.T) any { return pick(t, live.Interrupted("replica_id")) }, interrupted},
		{"a nil replica is alone", func(t *testing.T) any { return pick(t, none.Interrupted("replica_id")) }, []string{"dead", "gone", "live", "none"}},
		{"a nil replica owns nothing", func(t *testing.T) any { return none.OwnerID() == nil }, true},
		{"the heartbeat keeps a replica alive past DeadAfter", func(t *testing.T) any {
			live.DeadAfter = 150 * time.Millisecond
			defer func() { live.DeadAfter = time.Second }()
			time.Sleep(300 * time.Millisecond)
			ok, _ := live.Alive(ctx, live.ID)
			return ok
		}, true},
		{"Forget drops rows of long-dead replicas", func(t *testing.T) any {
			n, err := live.Forget(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}, int64(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got(t); !equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("Stop deletes the row", func(t *testing.T) {
		live.Stop()
		var n int64
		gdb.Raw(`SELECT COUNT(*) FROM replicas WHERE id = ?`, live.ID).Scan(&n)
		if n != 0 {
			t.Fatalf("row still there")
		}
		if ok, _ := live.Alive(ctx, live.ID); ok {
			t.Fatal("a stopped replica is alive")
		}
	})
}

func equal(a, b any) bool {
	as, ok1 := a.([]string)
	bs, ok2 := b.([]string)
	if ok1 && ok2 {
		if len(as) != len(bs) {
			return false
		}
		for i := range as {
			if as[i] != bs[i] {
				return false
			}
		}
		return true
	}
	return a == b
}

// Sweeps run every Heartbeat on a shared database only; one that panics
// does not stop the others.
func TestSweeps(t *testing.T) {
	gdb := db.OpenTemp(t)
	r := newReplica(gdb)
	var ran atomic.Int64
	r.OnSweep("panics", func(context.Context) (int64, error) { panic("boom") })
	r.OnSweep("counts", func(context.Context) (int64, error) { ran.Add(1); return 0, nil })
	r.Start(context.Background())
	time.Sleep(200 * time.Millisecond)
	r.Stop()
	switch n := ran.Load(); {
	case r.Shared() && n == 0:
		t.Fatal("the sweep never ran on a shared database")
	case !r.Shared() && n != 0:
		t.Fatalf("the sweep ran %d times on SQLite", n)
	}
}
