package cachever_test

import (
	"context"
	"testing"
	"time"

	"appkb/db"
	"appkb/internal/platform/cachever"
)

// TestSnapshotStandsInForCounterReads checks what a request's snapshot
// changes: lookups made with it use the counters as they were when it was
// taken (one read for all caches), lookups without it or after it went
// stale read the counter themselves, and a snapshot taken after a change
// sees the change.
func TestSnapshotStandsInForCounterReads(t *testing.T) {
	gdb := db.OpenTemp(t)
	cache := cachever.New[string, string](gdb, "api_keys")
	snaps := cachever.NewSnapshots(gdb)
	loads := 0
	value := "v1"
	load := func(context.Context) (string, bool, error) { loads++; return value, true, nil }
	bump := func() {
		t.Helper()
		if err := gdb.Exec(`UPDATE cache_versions SET version = version + 1 WHERE name = ?`, "api_keys").Error; err != nil {
			t.Fatal(err)
		}
	}
	get := func(ctx context.Context) string {
		t.Helper()
		v, ok, err := cache.Get(ctx, "k", load)
		if err != nil || !ok {
			t.Fatalf("Get: %v %v", ok, err)
		}
		return v
	}

	bg := context.Background()
	get(bg)
	before := snaps.Attach(bg)
	bump()
	value = "v2"
	tests := []struct {
		name      string
		ctx       context.Context
		want      string
		wantLoads int
	}{
		// The snapshot predates the change: what was current then is served.
		{"snapshot taken before the change", before, "v1", 1},
		// Without a snapshot the counter is read and the change seen.
		{"no snapshot", bg, "v2", 2},
		// A snapshot taken after the change sees it (and the entry loaded
		// just above under the new counter is served).
		{"snapshot taken after the change", snaps.Attach(bg), "v2", 2},
	}
	for _, tc := range tests {
		if got := get(tc.ctx); got != tc.want || loads != tc.wantLoads {
			t.Errorf("%s: got %q after %d loads, want %q after %d", tc.name, got, loads, tc.want, tc.wantLoads)
		}
	}

	// Another counter moving makes the next snapshot read every counter
	// again; this cache's counter did not move, so its entry stays.
	if err := gdb.Exec(`UPDATE cache_versions SET version = version + 1 WHERE name = ?`, "apps").Error; err != nil {
		t.Fatal(err)
	}
	if got := get(snaps.Attach(bg)); got != "v2" || loads != 2 {
		t.Errorf("after another counter moved: got %q after %d loads, want v2 after 2", got, loads)
	}
	// Two snapshots in a row with a change of this counter between them:
	// the second must not reuse the counters the first read.
	snaps.Attach(bg)
	bump()
	value = "v2b"
	if got := get(snaps.Attach(bg)); got != "v2b" || loads != 3 {
		t.Errorf("change between two snapshots: got %q after %d loads, want v2b after 3", got, loads)
	}

	// A snapshot that has gone stale is not trusted.
	stale := snaps.Attach(bg)
	bump()
	value = "v3"
	time.Sleep(300 * time.Millisecond)
	if got := get(stale); got != "v3" {
		t.Errorf("stale snapshot: got %q, want v3 (the counter read again)", got)
	}
}
