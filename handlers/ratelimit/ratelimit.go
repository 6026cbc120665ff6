// Package ratelimit keeps one token bucket per API key, so that one busy
// client cannot starve the others. Buckets of keys that went quiet are
// dropped after a while; memory stays bounded by the number of keys active
// in that window.
package ratelimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// idleAfter is how long a bucket is kept after its key's last request.
const idleAfter = 10 * time.Minute

// Limiter allows perSecond requests a second per key, with bursts of burst.
type Limiter struct {
	limit rate.Limit
	burst int

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
	now       func() time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// New returns a limiter; perSecond <= 0 means no limit (nil). A burst below
// one becomes the rate rounded up, at least one.
func New(perSecond float64, burst int) *Limiter {
	if perSecond <= 0 {
		return nil
	}
	if burst < 1 {
		burst = max(1, int(math.Ceil(perSecond)))
	}
	return &Limiter{limit: rate.Limit(perSecond), burst: burst, buckets: map[string]*bucket{}, now: time.Now}
}

// Allow takes one token from key's bucket. When none is left it reports how
// long until one is; a nil Limiter allows everything.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > idleAfter {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > idleAfter {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Peek reports whether key's bucket holds a token, without taking it, and
// when not, how long until it does. It lets a caller count only some
// requests (failures, say) with Allow and turn the others away while the
// key is over its limit. A nil Limiter allows everything.
func (l *Limiter) Peek(key string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		return true, 0
	}
	tokens := b.lim.TokensAt(now)
	if tokens >= 1 {
		return true, 0
	}
	return false, time.Duration((1 - tokens) / float64(l.limit) * float64(time.Second))
}
