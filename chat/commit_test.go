package chat

import (
	"context"
	"sync"
	"testing"

	"gorm.io/gorm"

	"appkb/db"
)

// TestGroupCommitIsolatesFailures writes from many goroutines at once; the
// units that fail (a duplicate key) report their error and leave no row,
// and every other unit's row is stored exactly once.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	gdb := db.OpenTemp(t)
	if err := gdb.Exec(`CREATE TABLE gc_probe (n INTEGER PRIMARY KEY, note TEXT)`).Error; err != nil {
		t.Fatal(err)
	}
	s := New(Config{DB: gdb})
	const units = 200
	failing := func(i int) bool { return i%17 == 0 }
	errs := make([]error, units)
	var wg sync.WaitGroup
	for i := range units {
		wg.Go(func() {
			errs[i] = s.write(context.Background(), func(tx *gorm.DB) error {
				if err := tx.Exec(`INSERT INTO gc_probe (n, note) VALUES (?, 'a')`, i).Error; err != nil {
					return err
				}
				if failing(i) { // the same key twice
					return tx.Exec(`INSERT INTO gc_probe (n, note) VALUES (?, 'b')`, i).Error
				}
				return tx.Exec(`UPDATE gc_probe SET note = note || 'x' WHERE n = ?`, i).Error
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if failing(i) != (err != nil) {
			t.Errorf("unit %d: error %v", i, err)
		}
	}
	var rows []struct {
		N    int
		Note string
	}
	if err := gdb.Raw(`SELECT n, note FROM gc_probe ORDER BY n`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	want := 0
	for i := range units {
		if !failing(i) {
			want++
		}
	}
	if len(rows) != want {
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	for _, r := range rows {
		if failing(r.N) || r.Note != "ax" {
			t.Errorf("row %+v", r)
		}
	}
}
