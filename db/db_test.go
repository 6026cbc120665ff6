package db

import (
	"testing"

	"gorm.io/gorm"
)

func TestMigrateIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	all, err := migrations(SQLite)
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 3; round++ {
		gdb, err := Open(dir) // Open migrates
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := Migrate(gdb); err != nil {
			t.Fatalf("round %d: second Migrate on the same handle: %v", round, err)
		}
		v, err := Version(gdb)
		if err != nil {
			t.Fatal(err)
		}
		if want := all[len(all)-1].version; v != want {
			t.Errorf("round %d: version %d, want %d", round, v, want)
		}
		var n int64
		gdb.Raw(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n)
		if int(n) != len(all) {
			t.Errorf("round %d: %d migrations recorded, want %d", round, n, len(all))
		}
		Close(gdb)
	}
}

func TestConnectionSettings(t *testing.T) {
	gdb := openSQLite(t)
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "10000"},
	}
	for _, tc := range tests {
		t.Run(tc.pragma, func(t *testing.T) {
			var got string
			if err := gdb.Raw("PRAGMA " + tc.pragma).Scan(&got).Error; err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("PRAGMA %s = %q, want %q", tc.pragma, got, tc.want)
			}
		})
	}
}

func TestFTS5IsAvailable(t *testing.T) {
	gdb := openSQLite(t)
	if err := gdb.Exec(`CREATE VIRTUAL TABLE probe USING fts5(body)`).Error; err != nil {
		t.Fatalf("FTS5 missing (build with -tags sqlite_fts5): %v", err)
	}
}

func TestFailedMigrationLeavesNoTrace(t *testing.T) {
	gdb := openSQLite(t)
	before, _ := Version(gdb)
	err := gdb.Transaction(func(tx *gorm.DB) error {
		return execScript(tx, `CREATE TABLE half_done(x INTEGER); THIS IS NOT SQL;`)
	})
	if err == nil {
		t.Fatal("a broken script should fail")
	}
	var n int64
	gdb.Raw(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'half_done'`).Scan(&n)
	if n != 0 {
		t.Error("the part of a failed migration that ran was not rolled back")
	}
	if after, _ := Version(gdb); after != before {
		t.Errorf("version moved from %d to %d", before, after)
	}
}

// openSQLite opens a temporary SQLite database whatever
// APPKB_TEST_DATABASE_URL says: these tests check SQLite's settings.
func openSQLite(t *testing.T) *gorm.DB {
	t.Helper()
	gdb, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Close(gdb) })
	return gdb
}
