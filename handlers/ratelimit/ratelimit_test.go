package ratelimit

import (
	"testing"
	"time"
)

func TestAllowPerKey(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	l := New(2, 3) // two a second, bursts of three
	l.now = func() time.Time { return clock }
	steps := []struct {
		name      string
		advance   time.Duration
		key       string
		wantOK    bool
		wantRetry time.Duration
	}{
		{"burst 1", 0, "a", true, 0},
		{"burst 2", 0, "a", true, 0},
		{"burst 3", 0, "a", true, 0},
		{"over the burst", 0, "a", false, 500 * time.Millisecond},
		{"another key is not affected", 0, "b", true, 0},
		{"refused requests take no token", 250 * time.Millisecond, "a", false, 250 * time.Millisecond},
		{"a token came back", 250 * time.Millisecond, "a", true, 0},
		{"and is gone again", 0, "a", false, 500 * time.Millisecond},
		{"idle buckets are dropped and start full", 11 * time.Minute, "b", true, 0},
	}
	for _, st := range steps {
		clock = clock.Add(st.advance)
		ok, retry := l.Allow(st.key)
		if ok != st.wantOK || retry != st.wantRetry {
			t.Errorf("%s: Allow = %v, %v; want %v, %v", st.name, ok, retry, st.wantOK, st.wantRetry)
		}
	}
	if n := len(l.buckets); n != 1 {
		t.Errorf("%d buckets after the idle sweep, want 1", n)
	}
	none := New(0, 5)
	if ok, _ := none.Allow("x"); !ok || none != nil {
		t.Error("a zero rate must mean no limit")
	}
}

// Peek tells whether a key has a token left without taking one.
func TestPeek(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	l := New(2, 2)
	l.now = func() time.Time { return clock }
	check := func(name string, wantOK bool, wantRetry time.Duration) {
		t.Helper()
		if ok, retry := l.Peek("a"); ok != wantOK || retry != wantRetry {
			t.Errorf("%s: Peek = %v, %v; want %v, %v", name, ok, retry, wantOK, wantRetry)
		}
	}
	check("unknown key", true, 0)
	l.Allow("a")
	check("one token left", true, 0)
	check("peeking takes none", true, 0)
	l.Allow("a")
	check("empty", false, 500*time.Millisecond)
	clock = clock.Add(500 * time.Millisecond)
	check("refilled", true, 0)
	if ok, _ := (*Limiter)(nil).Peek("a"); !ok {
		t.Error("a nil limiter must allow")
	}
}
