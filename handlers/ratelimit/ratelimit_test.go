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
