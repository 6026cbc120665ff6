package db

import (
	"strings"
	"sync"
	"testing"
)

// Both engines number their schema alike, so a version means the same
// tables on either and a copy between them can check it.
func TestBothHistoriesShareVersions(t *testing.T) {
	lite, err := migrations(SQLite)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := migrations(Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(lite) != len(pg) {
		t.Fatalf("%d SQLite migrations, %d PostgreSQL ones", len(lite), len(pg))
	}
	for i := range lite {
		if lite[i].version != pg[i].version || lite[i].name != pg[i].name {
			t.Errorf("migration %d: sqlite %04d_%s, postgres %04d_%s", i,
				lite[i].version, lite[i].name, pg[i].version, pg[i].name)
		}
	}
}

func TestConnectRefusesOtherURLs(t *testing.T) {
	for _, u := range []string{"mysql://u:secret@h/db", "sqlite:///tmp/x"} {
		_, err := Connect(u, t.TempDir())
		if err == nil {
			t.Fatalf("%s: accepted", u)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", u, err)
		}
	}
}

// Replicas starting at once against an empty database migrate it once,
// without tripping over each other.
func TestPostgresReplicasMigrateTogether(t *testing.T) {
	url := TempURL(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gdb, err := OpenPostgres(url)
			if err == nil {
				Close(gdb)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
	gdb, err := OpenPostgres(url)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(gdb)
	if err := CheckCurrent(gdb); err != nil {
		t.Fatal(err)
	}
	var n int64
	gdb.Raw(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n)
	all, _ := migrations(Postgres)
	if int(n) != len(all) {
		t.Errorf("schema_migrations has %d rows, want %d", n, len(all))
	}
}
