package flows

import "testing"

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestWaker checks that a wake reaches every follower waiting on the run
// and no other, and that followers who leave leave nothing behind.
func TestWaker(t *testing.T) {
	var w waker
	a1, releaseA1 := w.wait("a")
	a2, releaseA2 := w.wait("a")
	b, releaseB := w.wait("b")
	if w.pending() != 2 {
		t.Fatalf("pending %d", w.pending())
	}
	w.wake("a")
	if !closed(a1) || !closed(a2) || closed(b) {
		t.Fatalf("woken: a1 %v a2 %v b %v", closed(a1), closed(a2), closed(b))
	}
	// A new wait after the wake waits for the next one.
	again, releaseAgain := w.wait("a")
	if closed(again) {
		t.Fatal("a wait taken after the wake is already woken")
	}
	releaseA1()
	releaseA2()
	releaseA2() // twice is harmless
	if w.pending() != 2 {
		t.Fatalf("the old followers' release dropped the new wait: pending %d", w.pending())
	}
	releaseAgain()
	releaseB()
	if w.pending() != 0 {
		t.Errorf("pending %d after every follower left", w.pending())
	}
	w.wake("nobody") // no follower: nothing happens
}
