package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"
)

// waitWarm waits until p's pool holds n sandboxes that wait for their
// request.
func waitWarm(t testing.TB, p *Python, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		pl := p.pool.Load()
		if pl == nil {
			t.Fatal("the pool does not run")
		}
		have := 0
		pl.mu.Lock()
		for _, s := range pl.ready {
			select {
			case <-s.stdout.ready:
				have++
			default:
			}
		}
		pl.mu.Unlock()
		if have >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d sandboxes after 20 s, want %d", have, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// outcome is what a run gave, in a form two runs can be compared by.
func outcome(res map[string]any, err error) string {
	if err != nil {
		return fmt.Sprintf("error %T: %v", err, err)
	}
	return fmt.Sprintf("result %v", res)
}

// TestWarmRunsAsCold runs the same code in a sandbox started for the run
// and in one started ahead by the pool, and expects the same outcome, also
// when the code fails or hits a limit. Sandboxes started ahead serve one
// run each: what a run leaves behind is gone for the next.
func TestWarmRunsAsCold(t *testing.T) {
	cfg := Config{Timeout: 2 * time.Second, MaxOutput: 4 << 10, Memory: 128 << 20}
	cold, err := NewPython(cfg)
	if err != nil {
		t.Fatal(err)
	}
	warm := newPython(t, cfg)

	tests := []struct {
		name   string
		code   string
		inputs map[string]any
	}{
		{"inputs and result", "def main(a, b):\n    return {'sum': a + b, 'text': 'ü' * 3}\n", map[string]any{"a": 2, "b": 3.5}},
		{"print does not garble the answer", "def main():\n    print('noise')\n    return {'ok': True}\n", nil},
		{"exception with its line", "def main():\n    x = 1\n    return {'v': x / 0}\n", nil},
		{"syntax error", "def main(:\n    return {}\n", nil},
		{"no main", "x = 1\n", nil},
		{"not a dict", "def main():\n    return [1]\n", nil},
		{"time limit", "def main():\n    while True:\n        pass\n", nil},
		{"output limit", "def main():\n    return {'s': 'x' * 100000}\n", nil},
		{"memory limit", "def main():\n    b = bytearray(512 * 1024 * 1024)\n    return {'n': len(b)}\n", nil},
		{"a file left in /tmp by the last run is gone", "import os\ndef main():\n    seen = os.path.exists('/tmp/left')\n    open('/tmp/left', 'w').write('x')\n    return {'seen': seen}\n", nil},
		{"a process left running by the last run is gone", "import os, subprocess\ndef main():\n    pids = [p for p in os.listdir('/proc') if p.isdigit()]\n    subprocess.Popen(['sleep', '30'])\n    return {'pids': len(pids)}\n", nil},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Twice each, so the second run of the last two cases would
			// see what the first left if sandboxes were reused.
			for range 2 {
				want := outcome(cold.Run(ctx, tt.code, tt.inputs))
				waitWarm(t, warm, 1)
				before := warm.warmRuns.Load()
				got := outcome(warm.Run(ctx, tt.code, tt.inputs))
				if warm.warmRuns.Load() != before+1 {
					t.Fatal("the run did not use a sandbox started ahead")
				}
				if got != want {
					t.Fatalf("started ahead: %s\nstarted for the run: %s", got, want)
				}
			}
		})
	}
}

// TestPoolReplacesADeadSandbox kills the sandboxes waiting in the pool;
// the next run still succeeds, in a sandbox of its own.
func TestPoolReplacesADeadSandbox(t *testing.T) {
	p := newPython(t, Config{})
	waitWarm(t, p, DefaultWarm)
	pl := p.pool.Load()
	pl.mu.Lock()
	for _, s := range pl.ready {
		s.kill()
		<-s.exited
	}
	pl.mu.Unlock()
	before := p.warmRuns.Load()
	got, err := p.Run(context.Background(), "def main(n):\n    return {'n': n * 2}\n", map[string]any{"n": 21})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"n": 42.0}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if p.warmRuns.Load() != before {
		t.Fatal("a dead sandbox was counted as having served the run")
	}
}

// TestStopKillsIdleSandboxes stops the pool while one run is in progress:
// the sandboxes still waiting end, the run does not.
func TestStopKillsIdleSandboxes(t *testing.T) {
	p, err := NewPython(Config{})
	if err != nil {
		t.Fatal(err)
	}
	p.Start(context.Background())
	waitWarm(t, p, DefaultWarm)
	// A run that has taken its sandbox from the pool, still in progress
	// when the pool stops.
	s := p.pool.Load().take()
	if s == nil {
		t.Fatal("no sandbox ready")
	}
	in, _ := json.Marshal(request{Code: "import time\ndef main():\n    time.sleep(0.5)\n    return {'slept': True}\n", Inputs: map[string]any{}})
	type result struct {
		res map[string]any
		err error
		ok  bool
	}
	done := make(chan result, 1)
	go func() {
		res, err, ok := p.finish(context.Background(), s, in, true)
		done <- result{res, err, ok}
	}()
	pl := p.pool.Load()
	pl.mu.Lock()
	idle := append([]*started(nil), pl.ready...)
	pl.mu.Unlock()
	p.Stop()
	for i, s := range idle {
		if !s.ended() {
			t.Errorf("idle sandbox %d still runs after Stop", i)
		}
	}
	if r := <-done; !r.ok || r.err != nil || r.res["slept"] != true {
		t.Fatalf("the run in progress got %v, %v", r.res, r.err)
	}
	if p.pool.Load() != nil {
		t.Fatal("the pool still runs after Stop")
	}
	// Without the pool, runs start their own sandbox.
	if _, err := p.Run(context.Background(), "def main():\n    return {}\n", nil); err != nil {
		t.Fatal(err)
	}
}

// TestKilledEarlyLeavesNothing kills sandboxes in their first moments,
// while bwrap is still setting them up, and expects no process of theirs
// to outlive them. bwrap 0.8 leaves the inner bwrap of a sandbox whose
// outer bwrap was killed then waiting for ever, with init as its parent.
func TestKilledEarlyLeavesNothing(t *testing.T) {
	p, err := NewPython(Config{}) // fails when bwrap is missing: no skipping
	if err != nil {
		t.Fatal(err)
	}
	before := orphanedBwraps(p.bwrap)
	for i := range 60 {
		s, err := p.spawn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%6) * 250 * time.Microsecond)
		s.close()
	}
	var left []int
	for deadline := time.Now().Add(5 * time.Second); ; {
		left = left[:0]
		for pid := range orphanedBwraps(p.bwrap) {
			if !before[pid] {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range left {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(left) > 0 {
		t.Fatalf("%d bwrap processes outlived their sandboxes: %v", len(left), left)
	}
}

// orphanedBwraps lists the running processes of the bwrap binary whose
// parent is init.
func orphanedBwraps(bwrap string) map[int]bool {
	found := map[int]bool{}
	for pid, p := range procs("") {
		if p.exe == bwrap && p.ppid == 1 {
			found[pid] = true
		}
	}
	return found
}

// TestSweepOrphans leaks sandboxes the way a server killed outright does
// (only the outer bwrap is killed, while it sets the sandbox up) and
// expects sweepOrphans to end them, and to leave a live sandbox alone.
func TestSweepOrphans(t *testing.T) {
	p, err := NewPython(Config{}) // fails when bwrap is missing: no skipping
	if err != nil {
		t.Fatal(err)
	}
	live, err := p.spawn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer live.close()
	select {
	case <-live.stdout.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the live sandbox did not get ready")
	}

	// Other test processes start pools too, and their sweeps may end a
	// leak of this test's first; so leak until this sweep has ended one.
	before := orphanedBwraps(p.bwrap)
	var spawned []*started
	defer func() {
		for _, s := range spawned {
			s.close()
		}
	}()
	killed := map[int]bool{}
	for try := 0; try < 5 && len(killed) == 0; try++ {
		leaked := map[int]bool{}
		for i := 0; i < 300 && len(leaked) == 0; i++ {
			s, err := p.spawn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			spawned = append(spawned, s)
			time.Sleep(time.Duration(i%8) * 200 * time.Microsecond)
			s.cmd.Process.Kill() // the outer bwrap only, as a parent-death signal does
			time.Sleep(20 * time.Millisecond)
			for pid := range orphanedBwraps(p.bwrap) {
				if !before[pid] {
					leaked[pid] = true
				}
			}
		}
		if len(leaked) == 0 {
			t.Fatal("no sandbox was left waiting in 300 tries; the test cannot show the sweep")
		}
		for _, pid := range sweepOrphans(p.bwrap) {
			killed[pid] = true
		}
		for pid := range leaked {
			if !killed[pid] && syscall.Kill(pid, 0) == nil {
				t.Errorf("leaked bwrap %d outlived the sweep (swept %v)", pid, killed)
			}
		}
	}
	if len(killed) == 0 {
		t.Fatal("the sweep never ended a leaked sandbox")
	}
	if killed[live.cmd.Process.Pid] || live.ended() {
		t.Fatal("the sweep killed a live sandbox")
	}
	in, _ := json.Marshal(request{Code: "def main():\n    return {\"x\": 1}\n", Inputs: map[string]any{}})
	res, err, _ := p.finish(context.Background(), live, in, false)
	if err != nil || fmt.Sprint(res) != "map[x:1]" {
		t.Fatalf("the live sandbox after the sweep: %v, %v", res, err)
	}
}

// TestStartUpIsNotTheCodesTime starts each sandbox through a bwrap that
// first sleeps longer than the code's time limit, as a loaded machine may
// take to start one: the limit is the code's, so the run still succeeds.
func TestStartUpIsNotTheCodesTime(t *testing.T) {
	real, err := findBwrap("")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "slowbwrap")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Readable by the unprivileged user bwrap runs as when tests run as root.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(dir, "bwrap")
	script := "#!/bin/sh\nsleep 0.8\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := NewPython(Config{Bwrap: slow, Timeout: 500 * time.Millisecond, Warm: -1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(context.Background(), "def main():\n    return {'ok': True}\n", nil)
	if err != nil || res["ok"] != true {
		t.Fatalf("a run whose sandbox took 0.8 s to start, with a 0.5 s limit: %v, %v", res, err)
	}
}
