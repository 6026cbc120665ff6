// Package admission bounds the requests a server works on at once. A
// request over the limit waits in line for a short while; when no slot
// frees up in time it is turned away before any work is done, so that an
// overloaded server answers "come back later" quickly instead of slowing
// every request down until they fail.
package admission

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrBusy is returned by Acquire when no slot freed up within the wait.
var ErrBusy = errors.New("server busy")

// Limiter hands out a fixed number of slots. The zero value is not usable;
// call New.
type Limiter struct {
	slots chan struct{}
	wait  time.Duration
}

// New returns a limiter with max slots where a request waits at most wait
// for one. max <= 0 means no limit.
func New(max int, wait time.Duration) *Limiter {
	l := &Limiter{wait: wait}
	if max > 0 {
		l.slots = make(chan struct{}, max)
	}
	return l
}

// Wait is how long a request waits for a slot.
func (l *Limiter) Wait() time.Duration { return l.wait }

// InFlight is the number of slots taken.
func (l *Limiter) InFlight() int { return len(l.slots) }

// Acquire takes a slot, waiting up to the limiter's wait (or until ctx
// ends). It returns a release function, safe to call more than once, or
// ErrBusy (or ctx's error).
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	if l.slots == nil {
		return func() {}, nil
	}
	select {
	case l.slots <- struct{}{}:
		return l.releaser(), nil
	default:
	}
	if l.wait <= 0 {
		return nil, ErrBusy
	}
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return l.releaser(), nil
	case <-t.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *Limiter) releaser() func() {
	var once sync.Once
	return func() { once.Do(func() { <-l.slots }) }
}
