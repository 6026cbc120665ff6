package chat

import (
	"context"
	"sync"
	"time"

	"gorm.io/gorm"
)

// groupCommit runs the small write transactions of many concurrent answers
// as few SQLite transactions. A caller queues its work and takes the write
// lock; whoever holds the lock commits everything queued so far in one
// transaction, so under load one commit carries the rows of many messages.
// No goroutine runs in the background: the callers themselves take turns
// leading a batch.
type groupCommit struct {
	mu      sync.Mutex // guards pending
	pending []*commitReq
}

type commitReq struct {
	fn   func(tx *gorm.DB) error
	done chan error
}

// maxBatch bounds how many units of work share one transaction.
const maxBatch = 128

// write runs fn in a write transaction, possibly together with the work of
// other callers. fn must only write through tx and must be safe to run a
// second time: when any unit of a batch fails, the batch is rolled back and
// every unit runs again in its own transaction, so one failure never
// affects another caller's rows.
func (s *Service) write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	r := s.enqueue(fn)
	return s.lead(ctx, r)
}

// writeSoon is write for work nobody waits on (a late conversation
// title): it lets fn ride along with the next batch another caller
// commits, and commits it itself only when no batch came within delay.
// Under load this saves a transaction, and its commit, per message.
func (s *Service) writeSoon(ctx context.Context, fn func(tx *gorm.DB) error, delay time.Duration) error {
	r := s.enqueue(fn)
	t := time.NewTimer(delay)
	select {
	case err := <-r.done:
		t.Stop()
		return err
	case <-t.C:
	}
	return s.lead(ctx, r)
}

func (s *Service) enqueue(fn func(tx *gorm.DB) error) *commitReq {
	r := &commitReq{fn: fn, done: make(chan error, 1)}
	q := &s.commits
	q.mu.Lock()
	q.pending = append(q.pending, r)
	q.mu.Unlock()
	return r
}

// lead takes the write lock and commits queued batches until r's is done.
func (s *Service) lead(ctx context.Context, r *commitReq) error {
	q := &s.commits
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	for {
		select {
		case err := <-r.done: // committed, by an earlier leader or by us
			return err
		default:
		}
		// Ours is still queued: lead the next batch, oldest first.
		q.mu.Lock()
		n := min(len(q.pending), maxBatch)
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		q.mu.Unlock()
		s.commitBatch(ctx, batch)
	}
}

// commitBatch runs a batch in one transaction and reports to each member.
func (s *Service) commitBatch(ctx context.Context, batch []*commitReq) {
	db := s.db.WithContext(ctx)
	if len(batch) == 1 {
		batch[0].done <- db.Transaction(batch[0].fn)
		return
	}
	err := db.Transaction(func(tx *gorm.DB) error {
		for _, r := range batch {
			if err := r.fn(tx); err != nil {
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
		r.done <- db.Transaction(r.fn)
	}
}
