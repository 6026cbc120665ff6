package chat

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// groupCommit runs the small write transactions of many concurrent answers
// as few SQLite transactions. A caller queues its work; when no caller is
// leading, it becomes the leader and commits everything queued so far in
// one transaction, so under load one commit carries the rows of many
// messages. No goroutine runs in the background: the callers themselves
// take turns leading.
//
// Waiting callers block on their own channels, never on a lock: when a
// batch is committed, all of its callers are woken at once, instead of one
// after another through a contended mutex (each wake-up of such a convoy
// waits for a free processor, which on a busy machine stretched the
// slowest answers). A leader whose own work is done hands the lead to the
// oldest queued caller rather than commit other callers' work on its own
// time.
type groupCommit struct {
	mu      sync.Mutex // guards pending and leading
	pending []*commitReq
	leading bool // a caller is leading (or has been handed the lead)
}

type commitReq struct {
	fn   func(tx *gorm.DB) error
	done chan error
	// lead is signalled when this caller is handed the lead.
	lead chan struct{}
}

// maxBatch bounds how many units of work share one transaction.
const maxBatch = 128

// write runs fn in a write transaction, possibly together with the work of
// other callers. fn must only write through tx and must be safe to run a
// second time: when any unit of a batch fails, the batch is rolled back and
// every unit runs again in its own transaction, so one failure never
// affects another caller's rows.
func (s *Service) write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	r, leader := s.enqueue(fn, true)
	if leader {
		s.lead(ctx, r)
	}
	return s.await(ctx, r)
}

// writeSoon is write for work nobody waits on (a late conversation
// title): it lets fn ride along with the next batch another caller
// commits, and commits it itself only when no batch came within delay.
// Under load this saves a transaction, and its commit, per message.
func (s *Service) writeSoon(ctx context.Context, fn func(tx *gorm.DB) error, delay time.Duration) error {
	r, _ := s.enqueue(fn, false)
	t := time.NewTimer(delay)
	select {
	case err := <-r.done:
		t.Stop()
		return err
	case <-r.lead:
		t.Stop()
		s.lead(ctx, r)
	case <-t.C:
		if s.claimLead() {
			s.lead(ctx, r)
		}
	}
	return s.await(ctx, r)
}

// enqueue queues fn. With mayLead, the caller becomes the leader when
// nobody leads.
func (s *Service) enqueue(fn func(tx *gorm.DB) error, mayLead bool) (r *commitReq, leader bool) {
	r = &commitReq{fn: fn, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	q := &s.commits
	q.mu.Lock()
	q.pending = append(q.pending, r)
	if mayLead && !q.leading {
		q.leading, leader = true, true
	}
	q.mu.Unlock()
	return r, leader
}

// claimLead makes the caller the leader when nobody leads.
func (s *Service) claimLead() bool {
	q := &s.commits
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.leading || len(q.pending) == 0 {
		return false
	}
	q.leading = true
	return true
}

// await waits for r's work to be committed, leading when handed the lead.
func (s *Service) await(ctx context.Context, r *commitReq) error {
	for {
		select {
		case err := <-r.done:
			return err
		case <-r.lead:
			s.lead(ctx, r)
		}
	}
}

// lead commits queued batches, oldest first, until r's work is done; then
// it hands the lead to the oldest queued caller, or gives it up when the
// queue is empty. Only the leader calls it.
func (s *Service) lead(ctx context.Context, r *commitReq) {
	q := &s.commits
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.leading = false
			q.mu.Unlock()
			return
		}
		if len(r.done) > 0 { // ours is committed: pass the lead on
			next := q.pending[0]
			q.mu.Unlock()
			next.lead <- struct{}{}
			return
		}
		n := min(len(q.pending), maxBatch)
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		q.mu.Unlock()
		s.writeMu.Lock()
		s.commitBatch(ctx, batch)
		s.writeMu.Unlock()
	}
}

// commitBatch runs a batch in one transaction and reports to each member.
// A unit that panics fails with an error like any other failing unit: the
// leader must always get through, or every later write would wait for
// ever.
func (s *Service) commitBatch(ctx context.Context, batch []*commitReq) {
	db := s.db.WithContext(ctx)
	if len(batch) == 1 {
		batch[0].done <- db.Transaction(batch[0].run)
		return
	}
	err := db.Transaction(func(tx *gorm.DB) error {
		for _, r := range batch {
			if err := r.run(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, r := range batch {
			r.done <- nil
		}
		return
	}
	for _, r := range batch {
		r.done <- db.Transaction(r.run)
	}
}

// run runs the unit's work in tx, a panic becoming its error.
func (r *commitReq) run(tx *gorm.DB) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("write failed: panic: %v", v)
		}
	}()
	return r.fn(tx)
}
