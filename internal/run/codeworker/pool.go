// Package codeworker runs javascript code nodes and Jinja2 templates out
// of the server process, in workers re-executed from the server's own
// binary. A worker has hard limits (address space, stack, CPU time) that
// end it, not the server, when code runs away, and the parent kills it at
// the job's time limit or when the run stops. A worker serves one job at a
// time; a small pool keeps a few started ahead.
package codeworker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultMemoryLimit is how much memory a worker may use besides what the
// Go runtime has mapped when it starts.
const DefaultMemoryLimit = 768 << 20

// Defaults of a Pool.
const (
	DefaultIdle      = 2
	DefaultGrace     = 400 * time.Millisecond
	DefaultMaxAnswer = 32 << 20
	// idleFor is how long a worker beyond Idle stays idle before it is
	// closed.
	idleFor = 30 * time.Second
)

// FailKind tells why a job has no answer.
type FailKind int

const (
	// FailTimeout: the job ran past its time limit and its worker was killed.
	FailTimeout FailKind = iota + 1
	// FailStopped: the job's context ended and its worker was killed.
	FailStopped
	// FailMemory: the worker went over its memory limit.
	FailMemory
	// FailStack: the worker's stack overflowed.
	FailStack
	// FailCrash: the worker died otherwise, or answered beyond the limits.
	FailCrash
	// FailUnavailable: no worker could be started.
	FailUnavailable
)

// Failure is the error of a job that got no answer.
type Failure struct {
	Kind   FailKind
	Detail string
	// MemoryLimit is the worker's limit in bytes (for FailMemory).
	MemoryLimit int64
}

func (f *Failure) Error() string {
	switch f.Kind {
	case FailTimeout:
		return "the code exceeded its time limit"
	case FailStopped:
		return "the run was stopped"
	case FailMemory:
		return fmt.Sprintf("the code used more memory than allowed (%d MB)", f.MemoryLimit>>20)
	case FailStack:
		return "the code crashed: its calls nested too deeply (stack overflow)"
	case FailUnavailable:
		return "no code worker could be started: " + f.Detail
	}
	if f.Detail != "" {
		return "the code crashed: " + f.Detail
	}
	return "the code crashed"
}

// Pool starts workers and hands them jobs. The zero value is ready to use
// with the defaults; it starts workers on first use.
type Pool struct {
	// Idle is how many idle workers are kept started ahead (default
	// DefaultIdle; negative: none).
	Idle int
	// Max bounds the workers running at once (default 2 per CPU, at
	// least 4); a job beyond it waits for one.
	Max int
	// MemoryLimit is each worker's memory limit (default DefaultMemoryLimit).
	MemoryLimit int64
	// Grace is how long past its time limit a job may take before its
	// worker is killed (default DefaultGrace).
	Grace time.Duration
	// MaxAnswer bounds an answer's size in bytes (default DefaultMaxAnswer).
	MaxAnswer int
	// Log receives what workers print when they die (default slog's).
	Log *slog.Logger

	mu       sync.Mutex
	idle     []*worker
	running  int // started or starting, idle or busy
	starting int
	closed   bool
	freed    chan struct{} // closed and replaced whenever a slot frees up
	reaper   bool
	busy     map[*worker]struct{}
	quit     chan struct{} // closed by Stop: ends the reaper
	wg       sync.WaitGroup
}

var defaultPool = &Pool{}

// Default is the pool the workflow engine uses.
func Default() *Pool { return defaultPool }

func (p *Pool) idleTarget() int {
	switch {
	case p.Idle < 0:
		return 0
	case p.Idle == 0:
		return DefaultIdle
	}
	return p.Idle
}

func (p *Pool) maxWorkers() int {
	if p.Max > 0 {
		return p.Max
	}
	return max(4, 2*runtime.NumCPU())
}

func (p *Pool) memoryLimit() int64 {
	if p.MemoryLimit > 0 {
		return p.MemoryLimit
	}
	return DefaultMemoryLimit
}

func (p *Pool) grace() time.Duration {
	if p.Grace > 0 {
		return p.Grace
	}
	return DefaultGrace
}

func (p *Pool) maxAnswer() int {
	if p.MaxAnswer > 0 {
		return p.MaxAnswer
	}
	return DefaultMaxAnswer
}

func (p *Pool) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

// Start starts the idle workers ahead of the first job.
func (p *Pool) Start(context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = false
	p.quit = nil
	p.refillLocked()
}

// Stop kills every worker and waits for the pool's goroutines; jobs still
// running fail with FailUnavailable. Jobs that come later start workers
// anew.
func (p *Pool) Stop() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	if p.quit == nil {
		p.quit = make(chan struct{})
	}
	close(p.quit)
	for w := range p.busy {
		w.stopped.Store(true)
		w.kill()
	}
	p.mu.Unlock()
	for _, w := range idle {
		w.kill()
		p.release()
	}
	p.wg.Wait()
	// The jobs whose workers were killed give their slots back.
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		n := p.running
		if p.freed == nil {
			p.freed = make(chan struct{})
		}
		freed := p.freed
		p.mu.Unlock()
		if n <= 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-freed:
		case <-time.After(time.Until(deadline)):
		}
	}
	// Later jobs start workers again, lazily: a process that goes on
	// running workflows after Stop (tests, a restarted application) still
	// can.
	p.mu.Lock()
	p.closed = false
	p.quit = nil
	p.mu.Unlock()
}

// refillLocked starts workers in the background until Idle are idle or
// starting.
func (p *Pool) refillLocked() {
	for !p.closed && len(p.idle)+p.starting < p.idleTarget() && p.running < p.maxWorkers() {
		p.running++
		p.starting++
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() {
				if v := recover(); v != nil {
					p.log().Error("starting a code worker panicked", "panic", v)
				}
			}()
			w, err := p.spawn()
			p.mu.Lock()
			p.starting--
			if err != nil || p.closed {
				p.mu.Unlock()
				if err != nil {
					p.log().Warn("a code worker could not be started", "err", err)
				} else {
					w.kill()
				}
				p.release()
				return
			}
			w.idleSince = time.Now()
			p.idle = append(p.idle, w)
			p.signalLocked()
			p.mu.Unlock()
		}()
	}
}

// signalLocked wakes the jobs waiting for a worker or a slot.
func (p *Pool) signalLocked() {
	if p.freed != nil {
		close(p.freed)
		p.freed = nil
	}
}

// release gives back the slot of a worker that is gone.
func (p *Pool) release() {
	p.mu.Lock()
	p.running--
	p.signalLocked()
	p.refillLocked()
	p.mu.Unlock()
}

// acquire returns an idle worker, or starts one when a slot is free, or
// waits.
func (p *Pool) acquire(ctx context.Context) (*worker, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, &Failure{Kind: FailUnavailable, Detail: "the code workers have stopped"}
		}
		if n := len(p.idle); n > 0 {
			w := p.idle[n-1]
			p.idle = p.idle[:n-1]
			p.refillLocked()
			p.mu.Unlock()
			if w.dead() {
				p.release()
				continue
			}
			return w, nil
		}
		if p.running < p.maxWorkers() {
			p.running++
			p.refillLocked()
			p.mu.Unlock()
			w, err := p.spawn()
			if err != nil {
				p.release()
				return nil, &Failure{Kind: FailUnavailable, Detail: err.Error()}
			}
			return w, nil
		}
		if p.freed == nil {
			p.freed = make(chan struct{})
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, &Failure{Kind: FailStopped}
		}
	}
}

// put returns a healthy worker to the idle list.
func (p *Pool) put(w *worker) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		w.kill()
		p.release()
		return
	}
	w.idleSince = time.Now()
	p.idle = append(p.idle, w)
	if len(p.idle) > p.idleTarget() && !p.reaper {
		p.reaper = true
		if p.quit == nil {
			p.quit = make(chan struct{})
		}
		p.wg.Add(1)
		go p.reap(p.quit)
	}
	p.signalLocked()
	p.mu.Unlock()
}

// reap closes the workers beyond Idle that stayed idle for idleFor; it
// ends once there are none.
func (p *Pool) reap(quit <-chan struct{}) {
	defer p.wg.Done()
	defer func() {
		if v := recover(); v != nil {
			p.log().Error("the code worker reaper panicked", "panic", v)
		}
	}()
	t := time.NewTicker(idleFor / 3)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-quit:
			p.mu.Lock()
			p.reaper = false
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		var old []*worker
		// The oldest idle workers are at the front.
		for len(p.idle) > p.idleTarget() && time.Since(p.idle[0].idleSince) > idleFor {
			old = append(old, p.idle[0])
			p.idle = p.idle[1:]
		}
		done := p.closed || len(p.idle) <= p.idleTarget()
		if done {
			p.reaper = false
		}
		p.mu.Unlock()
		for _, w := range old {
			w.kill()
			p.release()
		}
		if done {
			return
		}
	}
}

// Run runs one job in a worker. An error is a *Failure: the job got no
// answer; a failure of the code itself is in the answer.
func (p *Pool) Run(ctx context.Context, j *Job) (*Answer, error) {
	if ctx.Err() != nil {
		return nil, &Failure{Kind: FailStopped}
	}
	frame, err := j.encode()
	if err != nil {
		return nil, &Failure{Kind: FailCrash, Detail: "its inputs could not be sent: " + err.Error()}
	}
	w, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.busy == nil {
		p.busy = map[*worker]struct{}{}
	}
	p.busy[w] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.busy, w)
		p.mu.Unlock()
	}()
	type result struct {
		a   *Answer
		err error
	}
	resc := make(chan result, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				resc <- result{err: fmt.Errorf("panic: %v", v)}
			}
		}()
		a, err := w.roundTrip(frame, p.maxAnswer())
		resc <- result{a, err}
	}()
	timer := time.NewTimer(j.Timeout + p.grace())
	defer timer.Stop()
	var fail *Failure
	pending := true
	select {
	case r := <-resc:
		pending = false
		if r.err == nil {
			if r.a.Retire {
				w.kill()
				p.release()
			} else {
				p.put(w)
			}
			return r.a, nil
		}
		fail = w.death(r.err, p.memoryLimit())
	case <-timer.C:
		fail = &Failure{Kind: FailTimeout}
	case <-ctx.Done():
		fail = &Failure{Kind: FailStopped}
	}
	w.kill()
	if pending {
		// The round trip ends once the worker's pipes close, which can
		// take a while for a process with a lot of memory to give back:
		// the slot is given back then, the answer now.
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() { _ = recover() }()
			<-resc
			p.release()
		}()
	} else {
		p.release()
	}
	if fail.Kind == FailCrash || fail.Kind == FailMemory || fail.Kind == FailStack {
		p.log().Warn("a code worker died", "reason", fail.Error(), "stderr", headOf(w.stderr.String()))
	}
	return nil, fail
}

// executable is the binary workers run: this process's own (through
// /proc/self/exe, which stays the running binary even when the file on disk
// has been replaced), else os.Executable.
func executable() (string, error) {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// spawn starts a worker and waits for its hello.
func (p *Pool) spawn() (*worker, error) {
	exe, err := executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{envWorker + "=1", fmt.Sprintf("%s=%d", envMemory, p.memoryLimit()), "GOTRACEBACK=single"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	w := &worker{cmd: cmd, stderr: &capped{max: 8 << 10}, done: make(chan struct{})}
	cmd.Stderr = w.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w.in = stdin
	w.out = bufio.NewReaderSize(stdout, 64<<10)
	go func() {
		defer func() { _ = recover() }()
		w.waitErr = cmd.Wait()
		close(w.done)
	}()
	helloc := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				helloc <- fmt.Errorf("panic: %v", v)
			}
		}()
		b, err := readFrame(w.out, 64)
		if err == nil && string(b) != hello {
			err = fmt.Errorf("the worker answered %q, not %q", b, hello)
		}
		helloc <- err
	}()
	select {
	case err = <-helloc:
	case <-time.After(30 * time.Second):
		err = errors.New("the worker did not start within 30s")
	}
	if err != nil {
		w.kill()
		<-w.done
		return nil, fmt.Errorf("a code worker did not start: %v (%s)", err, strings.TrimSpace(w.stderr.String()))
	}
	return w, nil
}

// worker is one worker process.
type worker struct {
	cmd       *exec.Cmd
	in        io.WriteCloser
	out       *bufio.Reader
	stderr    *capped
	done      chan struct{} // closed once the process is reaped
	waitErr   error
	idleSince time.Time
	killOnce  sync.Once
	stopped   atomic.Bool // killed by Pool.Stop
}

func (w *worker) dead() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// kill ends the worker and closes its pipes.
func (w *worker) kill() {
	w.killOnce.Do(func() {
		if w.cmd.Process != nil {
			_ = w.cmd.Process.Kill()
		}
		_ = w.in.Close()
	})
}

// roundTrip sends one job and reads its answer.
func (w *worker) roundTrip(frame []byte, maxAnswer int) (*Answer, error) {
	if err := writeFrame(w.in, frame); err != nil {
		return nil, err
	}
	b, err := readFrame(w.out, maxAnswer)
	if err != nil {
		return nil, err
	}
	return decodeAnswer(b)
}

// death tells why a round trip failed, once the worker is gone.
func (w *worker) death(err error, limit int64) *Failure {
	if errors.Is(err, errTooLarge) {
		return &Failure{Kind: FailCrash, Detail: "its answer was too large"}
	}
	if w.stopped.Load() {
		return &Failure{Kind: FailUnavailable, Detail: "the code workers have stopped"}
	}
	select {
	case <-w.done:
	case <-time.After(2 * time.Second):
	}
	w.kill()
	<-w.done
	msg := w.stderr.String()
	switch {
	case strings.Contains(msg, "out of memory") || strings.Contains(msg, "cannot allocate memory") ||
		strings.Contains(msg, "failed to create new OS thread") ||
		strings.Contains(msg, "address space collisions"): // the race detector's way to say it
		return &Failure{Kind: FailMemory, MemoryLimit: limit}
	case strings.Contains(msg, "stack overflow") || strings.Contains(msg, "stack exceeds"):
		return &Failure{Kind: FailStack}
	case strings.Contains(msg, "CPU time limit"):
		return &Failure{Kind: FailTimeout}
	}
	var ee *exec.ExitError
	if errors.As(w.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			switch ws.Signal() {
			case syscall.SIGKILL: // not ours: most likely the kernel's OOM killer
				return &Failure{Kind: FailMemory, MemoryLimit: limit}
			case syscall.SIGXCPU:
				return &Failure{Kind: FailTimeout}
			}
			return &Failure{Kind: FailCrash, Detail: "killed by " + ws.Signal().String()}
		}
		if first := firstFatal(msg); first != "" {
			return &Failure{Kind: FailCrash, Detail: first}
		}
		return &Failure{Kind: FailCrash, Detail: ee.Error()}
	}
	return &Failure{Kind: FailCrash, Detail: err.Error()}
}

// firstFatal picks the line of a Go crash report that says what happened.
func firstFatal(msg string) string {
	for _, line := range strings.Split(msg, "\n") {
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// headOf keeps the lines of a crash report before its goroutine dumps.
func headOf(msg string) string {
	if i := strings.Index(msg, "\ngoroutine "); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}
