package db

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"gorm.io/gorm"
)

func TestIsRead(t *testing.T) {
	cases := []struct {
		q    string
		want bool
	}{
		{"SELECT 1", true},
		{"  select * from x", true},
		{"\n\tWITH t AS (SELECT 1) SELECT * FROM t", true},
		{"INSERT INTO x VALUES (1) RETURNING id", false},
		{"UPDATE x SET a = 1 RETURNING a", false},
		{"PRAGMA busy_timeout", false},
		{"selection", false},
		{"DELETE FROM x", false},
		{"", false},
	}
	for _, c := range cases {
		if got := isRead(c.q); got != c.want {
			t.Errorf("isRead(%q) = %v, want %v", c.q, got, c.want)
		}
	}
}

// Many goroutines writing at once all succeed: they queue for the one
// writer instead of failing on SQLite's lock, and reads run beside them.
func TestConcurrentWritesNeverSeeALockedDatabase(t *testing.T) {
	gdb := openSQLite(t)
	if err := gdb.Exec(`CREATE TABLE counter(k TEXT PRIMARY KEY, n INTEGER NOT NULL)`).Error; err != nil {
		t.Fatal(err)
	}
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- gdb.WithContext(context.Background()).Transaction(func(tx *gorm.DB) error {
				if err := tx.Exec(`INSERT INTO counter(k, n) VALUES (?, 0)`, fmt.Sprint(i)).Error; err != nil {
					return err
				}
				return tx.Exec(`UPDATE counter SET n = n + 1 WHERE k = ?`, fmt.Sprint(i)).Error
			})
		}()
		go func() {
			defer wg.Done()
			var c int64
			errs <- gdb.Raw(`SELECT COUNT(*) FROM counter`).Scan(&c).Error
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	if err := gdb.Raw(`SELECT SUM(n) FROM counter`).Scan(&total).Error; err != nil || total != n {
		t.Fatalf("sum = %d (%v), want %d", total, err, n)
	}
}

// A write that reaches a reader connection fails instead of taking a lock.
func TestReadersAreReadOnly(t *testing.T) {
	gdb := openSQLite(t)
	p := gdb.ConnPool.(*pool)
	if _, err := p.readers.Exec(`CREATE TABLE nope(x INTEGER)`); err == nil {
		t.Fatal("a reader connection wrote")
	}
}
