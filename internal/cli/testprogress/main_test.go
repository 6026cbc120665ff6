package main

import (
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	cases := []struct {
		name   string
		events []event
		ok     bool
		want   []string
		absent []string
	}{
		{"passing package", []event{
			{Action: "start", Package: "p"},
			{Action: "run", Package: "p", Test: "TestA"},
			{Action: "output", Package: "p", Test: "TestA", Output: "noise of a passing test\n"},
			{Action: "pass", Package: "p", Test: "TestA"},
			{Action: "skip", Package: "p", Test: "TestB"},
			{Action: "output", Package: "p", Output: "ok  \tp\t1.5s\n"},
			{Action: "pass", Package: "p", Elapsed: 1.5},
		}, true, []string{"ok  \tp\t1.5s\n", "1.5s  p", "tests: 1 passed, 0 failed, 1 skipped\n"}, []string{"noise"}},
		{"failing test", []event{
			{Action: "output", Package: "p", Test: "TestA", Output: "want 1, got 2\n"},
			{Action: "fail", Package: "p", Test: "TestA"},
			{Action: "output", Package: "p", Output: "FAIL\tp\t0.1s\n"},
			{Action: "fail", Package: "p", Elapsed: 0.1},
		}, false, []string{"want 1, got 2\n", "FAIL\tp", "tests: 0 passed, 1 failed, 0 skipped\n"}, nil},
		{"package that does not build", []event{
			{Output: "# p\n./x.go:1: syntax error\n"},
			{Action: "output", Package: "p", Output: "FAIL\tp [build failed]\n"},
			{Action: "fail", Package: "p"},
		}, false, []string{"syntax error", "[build failed]", "tests: 0 passed, 0 failed, 0 skipped\n"}, nil},
		{"test killed by a panic", []event{
			{Action: "output", Package: "p", Test: "TestA", Output: "panic: boom\n"},
			{Action: "fail", Package: "p", Elapsed: 0.2},
		}, false, []string{"panic: boom"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			r := newReport(&b)
			for _, e := range c.events {
				r.handle(e)
			}
			if ok := r.finish(); ok != c.ok {
				t.Errorf("finish = %v, want %v", ok, c.ok)
			}
			got := b.String()
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(got, a) {
					t.Errorf("output has %q:\n%s", a, got)
				}
			}
			if !strings.HasSuffix(got, "skipped\n") {
				t.Errorf("output does not close on the counts:\n%s", got)
			}
		})
	}
}

func TestTickNamesRunningPackages(t *testing.T) {
	var b strings.Builder
	r := newReport(&b)
	clock := time.Unix(1000, 0)
	r.now = func() time.Time { return clock }
	r.lastPrint = clock
	r.handle(event{Action: "start", Package: "slow"})
	r.handle(event{Action: "start", Package: "quick"})
	r.handle(event{Action: "pass", Package: "quick"})
	b.Reset()
	clock = clock.Add(10 * time.Second)
	r.tick(20 * time.Second)
	if b.Len() != 0 {
		t.Fatalf("printed before 20 s of quiet: %q", b.String())
	}
	clock = clock.Add(15 * time.Second)
	r.tick(20 * time.Second)
	if got := b.String(); got != "… still running: slow (25s)\n" {
		t.Fatalf("tick printed %q", got)
	}
}
