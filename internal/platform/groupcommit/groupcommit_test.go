package groupcommit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

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
	q := New(gdb)
	const units = 200
	failing := func(i int) bool { return i%17 == 0 }
	errs := make([]error, units)
	var wg sync.WaitGroup
	for i := range units {
		wg.Go(func() {
			errs[i] = q.Write(context.Background(), func(tx *gorm.DB) error {
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

// TestWriteSoonRidesAlong checks WriteSoon: alone, it commits its work
// itself once its delay is over; with another write coming, its work is
// committed in that write's batch (long before its own delay), and a
// failure of its work leaves the other write alone.
func TestWriteSoonRidesAlong(t *testing.T) {
	gdb := db.OpenTemp(t)
	if err := gdb.Exec(`CREATE TABLE gc_soon (n INTEGER PRIMARY KEY)`).Error; err != nil {
		t.Fatal(err)
	}
	q := New(gdb)
	insert := func(n int) func(tx *gorm.DB) error {
		return func(tx *gorm.DB) error { return tx.Exec(`INSERT INTO gc_soon (n) VALUES (?)`, n).Error }
	}
	count := func(n int) int {
		var c int
		if err := gdb.Raw(`SELECT count(*) FROM gc_soon WHERE n = ?`, n).Scan(&c).Error; err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()

	// Alone: stored after the delay.
	if err := q.WriteSoon(ctx, insert(1), time.Millisecond); err != nil || count(1) != 1 {
		t.Fatalf("alone: err %v, rows %d", err, count(1))
	}

	tests := []struct {
		name    string
		soon    func(tx *gorm.DB) error
		wantErr bool
	}{
		{"work that succeeds is committed with the next write", insert(2), false},
		{"work that fails does not sink the next write", insert(1), true}, // duplicate key
	}
	for i, tc := range tests {
		done := make(chan error, 1)
		go func() { done <- q.WriteSoon(ctx, tc.soon, time.Hour) }()
		// Wait until it is queued, then write: the writer leads the batch.
		for queued := false; !queued; {
			q.mu.Lock()
			queued = len(q.pending) > 0
			q.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
		other := 100 + i
		if err := q.Write(ctx, insert(other)); err != nil {
			t.Fatalf("%s: the other write failed: %v", tc.name, err)
		}
		select {
		case err := <-done:
			if (err != nil) != tc.wantErr {
				t.Errorf("%s: WriteSoon error %v", tc.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: WriteSoon was not committed with the next write", tc.name)
		}
		if count(other) != 1 {
			t.Errorf("%s: the other write's row is missing", tc.name)
		}
	}
	if count(2) != 1 || count(1) != 1 {
		t.Errorf("rows: n=1 %d, n=2 %d, want 1 and 1", count(1), count(2))
	}
}

// TestGroupCommitHandsOffTheLead queues many WriteSoon units that would
// wait an hour on their own, then writes from many goroutines at once.
// Every unit must be committed exactly once by the writers' batches: a
// leader whose own work is done hands the lead on (to a queued WriteSoon
// unit too), and no queued unit is left behind when leading stops.
func TestGroupCommitHandsOffTheLead(t *testing.T) {
	gdb := db.OpenTemp(t)
	if err := gdb.Exec(`CREATE TABLE gc_handoff (n INTEGER PRIMARY KEY)`).Error; err != nil {
		t.Fatal(err)
	}
	q := New(gdb)
	ctx := context.Background()
	insert := func(n int) func(tx *gorm.DB) error {
		return func(tx *gorm.DB) error { return tx.Exec(`INSERT INTO gc_handoff (n) VALUES (?)`, n).Error }
	}
	const soon, writers = 40, 160
	errs := make(chan error, soon+writers)
	var wg sync.WaitGroup
	for i := range soon {
		wg.Go(func() { errs <- q.WriteSoon(ctx, insert(i), time.Hour) })
	}
	for queued := 0; queued < soon; {
		q.mu.Lock()
		queued = len(q.pending)
		q.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	for i := range writers {
		wg.Go(func() { errs <- q.Write(ctx, insert(soon+i)) })
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("some units were never committed")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var n, distinct int
	if err := gdb.Raw(`SELECT count(*), count(DISTINCT n) FROM gc_handoff`).Row().Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != soon+writers || distinct != n {
		t.Errorf("%d rows (%d distinct), want %d", n, distinct, soon+writers)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.leading || len(q.pending) != 0 {
		t.Errorf("after all units: leading %v, %d pending", q.leading, len(q.pending))
	}
}

// TestGroupCommitSurvivesAPanic makes one unit of a batch panic: it fails
// with an error, the others are committed, and later writes still go
// through (a leader that never came back would leave them waiting).
func TestGroupCommitSurvivesAPanic(t *testing.T) {
	gdb := db.OpenTemp(t)
	if err := gdb.Exec(`CREATE TABLE gc_panic (n INTEGER PRIMARY KEY)`).Error; err != nil {
		t.Fatal(err)
	}
	q := New(gdb)
	ctx := context.Background()
	const units = 50
	errs := make([]error, units)
	var wg sync.WaitGroup
	for i := range units {
		wg.Go(func() {
			errs[i] = q.Write(ctx, func(tx *gorm.DB) error {
				if i == 7 {
					panic("broken unit")
				}
				return tx.Exec(`INSERT INTO gc_panic (n) VALUES (?)`, i).Error
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if (i == 7) != (err != nil) {
			t.Errorf("unit %d: error %v", i, err)
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- q.Write(ctx, func(tx *gorm.DB) error { return tx.Exec(`INSERT INTO gc_panic (n) VALUES (1000)`).Error })
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write after the panic never finished")
	}
	var n int
	if err := gdb.Raw(`SELECT count(*) FROM gc_panic`).Row().Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != units {
		t.Errorf("%d rows, want %d", n, units)
	}
}

// TestLaterRidesWithTheNextWrite queues units with Later: they stay queued
// until a write or a wait commits them, in the order they were queued, and
// a failing one reports its error on Wait without sinking the others.
func TestLaterRidesWithTheNextWrite(t *testing.T) {
	gdb := db.OpenTemp(t)
	if err := gdb.Exec(`CREATE TABLE gc_later (n INTEGER PRIMARY KEY, seq INTEGER)`).Error; err != nil {
		t.Fatal(err)
	}
	q := New(gdb)
	ctx := context.Background()
	var seq int
	insert := func(n int) func(tx *gorm.DB) error {
		return func(tx *gorm.DB) error {
			seq++ // units run one at a time, under the lead
			return tx.Exec(`INSERT INTO gc_later (n, seq) VALUES (?, ?)`, n, seq).Error
		}
	}
	count := func() int {
		var c int
		if err := gdb.Raw(`SELECT count(*) FROM gc_later`).Scan(&c).Error; err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name   string
		finish func(last *Pending) error // what commits the queued units
	}{
		{"a write commits them", func(*Pending) error { return q.Write(ctx, insert(1000)) }},
		{"waiting on the last commits them", func(last *Pending) error { return last.Wait(ctx) }},
	}
	for i, tc := range tests {
		base := (i + 1) * 10
		before := count()
		var ps []*Pending
		for k := range 4 {
			n := base + k
			if k == 2 {
				n = base // the same key again: this unit fails
			}
			ps = append(ps, q.Later(insert(n)))
		}
		time.Sleep(20 * time.Millisecond)
		if done, _ := ps[0].Done(); done || count() != before {
			t.Fatalf("%s: committed before anybody wrote or waited", tc.name)
		}
		if err := tc.finish(ps[len(ps)-1]); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for k, p := range ps {
			done, err := p.Done()
			if !done {
				t.Errorf("%s: unit %d still queued after a later one was committed", tc.name, k)
			}
			if werr := p.Wait(ctx); (werr != nil) != (k == 2) || (err != nil) != (k == 2) {
				t.Errorf("%s: unit %d: errors %v / %v", tc.name, k, err, werr)
			}
		}
		var order []int
		if err := gdb.Raw(`SELECT n FROM gc_later WHERE n BETWEEN ? AND ? ORDER BY seq`, base, base+9).Scan(&order).Error; err != nil {
			t.Fatal(err)
		}
		if want := []int{base, base + 1, base + 3}; fmt.Sprint(order) != fmt.Sprint(want) {
			t.Errorf("%s: committed %v, want %v in that order", tc.name, order, want)
		}
	}
}

// TestLaterNeverTakesTheLead mixes Later and Write from many goroutines:
// a leader must not hand the lead to a unit nobody waits on (its writer
// would never commit the queue), and every unit is committed once its
// writer waits.
func TestLaterNeverTakesTheLead(t *testing.T) {
	gdb := db.OpenTemp(t)
	if err := gdb.Exec(`CREATE TABLE gc_mixed (n INTEGER PRIMARY KEY)`).Error; err != nil {
		t.Fatal(err)
	}
	q := New(gdb)
	ctx := context.Background()
	insert := func(n int) func(tx *gorm.DB) error {
		return func(tx *gorm.DB) error { return tx.Exec(`INSERT INTO gc_mixed (n) VALUES (?)`, n).Error }
	}
	const writers, each = 32, 5
	errs := make(chan error, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var ps []*Pending
			for k := range each - 1 {
				ps = append(ps, q.Later(insert(w*each+k)))
				time.Sleep(time.Duration(w%3) * 100 * time.Microsecond)
			}
			if w%2 == 0 {
				errs <- q.Write(ctx, insert(w*each+each-1))
			} else {
				ps = append(ps, q.Later(insert(w*each+each-1)))
			}
			for _, p := range ps {
				errs <- p.Wait(ctx)
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("some writers were never done")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var n int
	if err := gdb.Raw(`SELECT count(*) FROM gc_mixed`).Row().Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != writers*each {
		t.Errorf("%d rows, want %d", n, writers*each)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.leading || len(q.pending) != 0 {
		t.Errorf("after all units: leading %v, %d pending", q.leading, len(q.pending))
	}
}
