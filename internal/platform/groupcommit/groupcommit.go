// Package groupcommit runs the small write transactions of many concurrent
// requests as few database transactions: the rows of chat messages, of
// workflow runs and of their node executions. On SQLite, whose single
// writer commits one transaction at a time, a commit costs about as much
// for one row as for a hundred, so under load one commit carrying the rows
// of many requests is what lets throughput grow with concurrency.
package groupcommit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Queue collects units of write work and commits them in batches. A caller
// queues its unit; when no caller is leading, it becomes the leader and
// commits everything queued so far in one transaction. No goroutine runs
// in the background: the callers themselves take turns leading.
//
// Waiting callers block on their own channels, never on a lock: when a
// batch is committed, all of its callers are woken at once, instead of one
// after another through a contended mutex (each wake-up of such a convoy
// waits for a free processor, which on a busy machine stretches the
// slowest requests). A leader whose own work is done hands the lead to
// the oldest queued caller rather than commit other callers' work on its
// own time.
//
// A Queue is safe for concurrent use. Share one per database, so that
// every kind of row rides in the same batches.
type Queue struct {
	db      *gorm.DB
	mu      sync.Mutex // guards pending and leading
	pending []*unit
	leading bool // a caller is leading (or has been handed the lead)
}

type unit struct {
	fn   func(tx *gorm.DB) error
	done chan error
	// lead is signalled when this caller is handed the lead.
	lead chan struct{}
	// unwatched says that nobody waits on the unit yet (Later until
	// Wait), so nobody would take the lead if it were handed to it.
	unwatched bool
}

// maxBatch bounds how many units share one transaction.
const maxBatch = 128

// New returns a Queue that writes to db.
func New(db *gorm.DB) *Queue { return &Queue{db: db} }

// Write runs fn in a write transaction, possibly together with the work of
// other callers, and returns once it is committed. fn must only write
// through tx and must be safe to run a second time: when any unit of a
// batch fails, the batch is rolled back and every unit runs again in its
// own transaction, so one failure never affects another caller's rows.
//
// A batch carries other callers' work, so it runs on a context that ctx's
// cancellation does not reach: once queued, a unit is committed.
func (q *Queue) Write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	u, leader := q.enqueue(fn, true, false)
	if leader {
		q.lead(ctx, u)
	}
	return q.await(ctx, u)
}

// WriteSoon is Write for work nobody waits on (a late conversation title,
// say): it lets fn ride along with the next batch another caller commits,
// and commits it itself only when no batch came within delay. Under load
// this saves a transaction, and its commit.
func (q *Queue) WriteSoon(ctx context.Context, fn func(tx *gorm.DB) error, delay time.Duration) error {
	u, _ := q.enqueue(fn, false, false)
	t := time.NewTimer(delay)
	select {
	case err := <-u.done:
		t.Stop()
		return err
	case <-u.lead:
		t.Stop()
		q.lead(ctx, u)
	case <-t.C:
		if q.claimLead() {
			q.lead(ctx, u)
		}
	}
	return q.await(ctx, u)
}

// Later queues fn as Write does but returns at once, without leading: the
// unit rides along with the next batch any caller commits. Units are
// committed in the order they were queued, so a unit queued later (by
// Later or by Write) is never committed before it, and once a later unit
// of the same caller is committed, so is this one. The caller must call
// Wait on the result in the end: until somebody writes or waits, the unit
// stays queued.
func (q *Queue) Later(fn func(tx *gorm.DB) error) *Pending {
	u, _ := q.enqueue(fn, false, true)
	return &Pending{q: q, u: u}
}

// Pending is a unit queued by Later. It is for one goroutine at a time.
type Pending struct {
	q    *Queue
	u    *unit
	done bool
	err  error
}

// Done reports, without waiting, whether the unit has been committed (or
// has failed), and its error.
func (p *Pending) Done() (bool, error) {
	if !p.done {
		select {
		case p.err = <-p.u.done:
			p.done = true
		default:
		}
	}
	return p.done, p.err
}

// Wait returns once the unit is committed, with its error; when nobody is
// leading, the caller commits the queue itself, as Write does.
func (p *Pending) Wait(ctx context.Context) error {
	if done, err := p.Done(); done {
		return err
	}
	q, leader := p.q, false
	q.mu.Lock()
	p.u.unwatched = false
	if !q.leading && len(q.pending) > 0 {
		q.leading, leader = true, true
	}
	q.mu.Unlock()
	if leader {
		q.lead(ctx, p.u)
	}
	p.err, p.done = q.await(ctx, p.u), true
	return p.err
}

// enqueue queues fn. With mayLead, the caller becomes the leader when
// nobody leads; an unwatched unit is never handed the lead.
func (q *Queue) enqueue(fn func(tx *gorm.DB) error, mayLead, unwatched bool) (u *unit, leader bool) {
	u = &unit{fn: fn, done: make(chan error, 1), lead: make(chan struct{}, 1), unwatched: unwatched}
	q.mu.Lock()
	q.pending = append(q.pending, u)
	if mayLead && !q.leading {
		q.leading, leader = true, true
	}
	q.mu.Unlock()
	return u, leader
}

// claimLead makes the caller the leader when nobody leads.
func (q *Queue) claimLead() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.leading || len(q.pending) == 0 {
		return false
	}
	q.leading = true
	return true
}

// await waits for u's work to be committed, leading when handed the lead.
func (q *Queue) await(ctx context.Context, u *unit) error {
	for {
		select {
		case err := <-u.done:
			return err
		case <-u.lead:
			q.lead(ctx, u)
		}
	}
}

// lead commits queued batches, oldest first, until u's work is done; then
// it hands the lead to the oldest queued caller that waits, or gives it up
// when there is none (units queued by Later stay queued until the next
// Write or Wait). Only the leader calls it.
func (q *Queue) lead(ctx context.Context, u *unit) {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.leading = false
			q.mu.Unlock()
			return
		}
		if len(u.done) > 0 { // ours is committed: pass the lead on
			var next *unit
			for _, p := range q.pending {
				if !p.unwatched {
					next = p
					break
				}
			}
			if next == nil {
				q.leading = false
				q.mu.Unlock()
				return
			}
			q.mu.Unlock()
			next.lead <- struct{}{}
			return
		}
		n := min(len(q.pending), maxBatch)
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		q.mu.Unlock()
		q.commit(ctx, batch)
	}
}

// commit runs a batch in one transaction and reports to each member. A
// unit that panics fails with an error like any other failing unit: the
// leader must always get through, or every later write would wait for
// ever.
func (q *Queue) commit(ctx context.Context, batch []*unit) {
	db := q.db.WithContext(context.WithoutCancel(ctx))
	if len(batch) == 1 {
		batch[0].done <- db.Transaction(batch[0].run)
		return
	}
	err := db.Transaction(func(tx *gorm.DB) error {
		for _, u := range batch {
			if err := u.run(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, u := range batch {
			u.done <- nil
		}
		return
	}
	for _, u := range batch {
		u.done <- db.Transaction(u.run)
	}
}

// run runs the unit's work in tx, a panic becoming its error.
func (u *unit) run(tx *gorm.DB) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("write failed: panic: %v", v)
		}
	}()
	return u.fn(tx)
}
