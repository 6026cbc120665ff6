package tools

import (
	"context"
	"testing"
	"time"
)

// pastDeadline is a context whose deadline has passed while its timer has
// not run yet: Err is still nil, as it can be for a moment on a busy
// machine.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestExpired checks that a call's deadline counts as passed by the clock,
// not only once the context's timer has cancelled it: an MCP call whose
// transport gave up at the same moment must still be reported as too slow.
func TestExpired(t *testing.T) {
	gone, cancelGone := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancelGone()
	<-gone.Done()
	running, cancelRunning := context.WithTimeout(context.Background(), time.Hour)
	defer cancelRunning()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"no deadline", context.Background(), false},
		{"deadline ahead", running, false},
		{"deadline passed, timer run", gone, true},
		{"deadline passed, timer not run yet", pastDeadline{context.Background()}, true},
		{"cancelled without a deadline", cancelled, false},
	}
	for _, tc := range tests {
		if got := expired(tc.ctx); got != tc.want {
			t.Errorf("%s: expired %v, want %v", tc.name, got, tc.want)
		}
	}
}
