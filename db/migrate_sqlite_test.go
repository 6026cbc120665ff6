package db

import (
	"slices"
	"strings"
	"testing"
)

// TestMigrateSQLiteBatches runs synthetic histories through the SQLite
// runner on a migrated database: what is recorded is skipped, what is
// pending is applied and recorded, and a failing migration leaves the
// database exactly as it was, the migrations before it in the same batch
// included.
func TestMigrateSQLiteBatches(t *testing.T) {
	first := []migration{
		{version: 9001, name: "t_one", sql: `CREATE TABLE t_one (id INTEGER PRIMARY KEY);`},
		{version: 9002, name: "t_two", sql: `CREATE TABLE t_two (id INTEGER PRIMARY KEY); INSERT INTO t_two(id) VALUES (1);`},
	}
	tests := []struct {
		name       string
		then       []migration // applied after first
		wantErr    string
		wantTables []string // of t_one, t_two, t_three, t_four
		wantDone   []int    // versions >= 9000 recorded
	}{
		{
			name:       "an upgrade applies only what is pending",
			then:       append(slices.Clone(first), migration{version: 9003, name: "t_three", sql: `CREATE TABLE t_three (id INTEGER);`}),
			wantTables: []string{"t_one", "t_three", "t_two"},
			wantDone:   []int{9001, 9002, 9003},
		},
		{
			name: "a failure rolls the whole batch back",
			then: append(slices.Clone(first),
				migration{version: 9003, name: "t_three", sql: `CREATE TABLE t_three (id INTEGER);`},
				migration{version: 9004, name: "broken", sql: `CREATE TABLE t_four (id INTEGER); INSERT INTO no_such_table VALUES (1);`}),
			wantErr:    "migration 9004_broken",
			wantTables: []string{"t_one", "t_two"},
			wantDone:   []int{9001, 9002},
		},
		{
			name:       "running the same history again changes nothing",
			then:       first,
			wantTables: []string{"t_one", "t_two"},
			wantDone:   []int{9001, 9002},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gdb := openSQLite(t)
			if err := migrateSQLite(gdb, first); err != nil {
				t.Fatal(err)
			}
			err := migrateSQLite(gdb, tc.then)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("migrate: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("migrate: %v, want an error naming %q", err, tc.wantErr)
			}
			var tables []string
			gdb.Raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 't\_%' ESCAPE '\' ORDER BY name`).Scan(&tables)
			if !slices.Equal(tables, tc.wantTables) {
				t.Errorf("tables %v, want %v", tables, tc.wantTables)
			}
			var done []int
			gdb.Raw(`SELECT version FROM schema_migrations WHERE version >= 9000 ORDER BY version`).Scan(&done)
			if !slices.Equal(done, tc.wantDone) {
				t.Errorf("recorded %v, want %v", done, tc.wantDone)
			}
			var rows int64
			gdb.Raw(`SELECT COUNT(*) FROM t_two`).Scan(&rows)
			if rows != 1 {
				t.Errorf("t_two holds %d rows, want 1 (its migration ran once)", rows)
			}
		})
	}
}
