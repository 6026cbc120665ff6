package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := New(2, 20*time.Millisecond)
	r1, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(context.Background()); !errors.Is(err, ErrBusy) {
		t.Fatalf("third acquire: %v, want ErrBusy", err)
	}
	r1()
	r1() // a second release gives nothing back
	if l.InFlight() != 1 {
		t.Fatalf("in flight %d, want 1", l.InFlight())
	}
	done := make(chan error)
	go func() {
		r, err := New(0, 0).Acquire(context.Background()) // unlimited
		if err == nil {
			r()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A waiter gets the slot a release frees.
	got := make(chan error)
	go func() {
		l2 := l
		r, err := l2.Acquire(context.Background())
		if err == nil {
			r()
		}
		got <- err
	}()
	r3, err := l.Acquire(context.Background())
	if err == nil {
		r3()
	}
	r2()
	if err := <-got; err != nil && !errors.Is(err, ErrBusy) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	full := New(1, time.Hour)
	if _, err := full.Acquire(ctx); err != nil {
		t.Fatal(err) // a free slot is taken even with a done context
	}
	if _, err := full.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}
