// Package sandbox runs untrusted workflow code in a separate, isolated
// process. Python runs python3 code nodes inside bubblewrap (bwrap): the
// process has no network, sees a read-only /usr and little else, writes
// only to a small private /tmp, and lives under CPU, memory, process and
// file-size limits and a wall-clock deadline. Memory and processes are
// limited for the sandbox as a whole by a cgroup of its own where the
// server may create one (see cgroup.go), else per process by rlimits. Without bwrap nothing runs:
// code is never executed outside the sandbox.
//
// Network access is off unless Config.Network is set. Even then the sandbox
// keeps its own empty network namespace: its only way out is an HTTP proxy
// on a unix socket bound into it, and that proxy dials through the SSRF
// guard, so code reaches exactly the addresses the guard permits.
//
// The package does not depend on the workflow engine; workflow uses
// *Python through its CodeRunner interface.
package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"appkb/internal/platform/netguard"
)

// Defaults for the zero fields of Config.
const (
	DefaultPython    = "/usr/bin/python3"
	DefaultBwrap     = "/usr/bin/bwrap"
	DefaultTimeout   = 10 * time.Second
	DefaultMemory    = 256 << 20 // bytes of memory
	DefaultMaxOutput = 1 << 20   // bytes of JSON result
	DefaultTmpSize   = 32 << 20  // bytes of /tmp, also the largest file
	DefaultMaxProcs  = 32        // processes and threads
	DefaultMaxFiles  = 256       // open file descriptors
)

// nobody is the user the sandbox runs as, inside its user namespace and,
// when the server runs as root, on the host as well.
const nobody = 65534

var (
	// ErrNoBubblewrap means bwrap is missing, so python code cannot run.
	ErrNoBubblewrap = errors.New("python3 code nodes need bubblewrap (bwrap), which is not installed; install the Debian package bubblewrap")
	// ErrNoPython means the python3 interpreter is missing.
	ErrNoPython = errors.New("python3 code nodes need a python3 interpreter, which is not installed; install the Debian package python3")

	// ErrTimeout, ErrMemory and ErrOutputTooLarge are wrapped by the
	// errors Run returns when the code hits the matching limit.
	ErrTimeout        = errors.New("time limit exceeded")
	ErrMemory         = errors.New("memory limit exceeded")
	ErrOutputTooLarge = errors.New("output limit exceeded")
)

// Config tunes a Python sandbox. The zero value is usable: every zero
// field takes its default.
type Config struct {
	// Bwrap is the bubblewrap binary: bwrap from PATH, else DefaultBwrap.
	Bwrap string
	// Python is the interpreter, which must live under /usr (the only
	// system tree the sandbox sees): DefaultPython when it exists, else
	// python3 from PATH once its symbolic links are resolved.
	Python string
	// Timeout bounds one run in wall-clock time (DefaultTimeout); the CPU
	// time limit is derived from it. A deadline on the context passed to
	// Run applies as well.
	Timeout time.Duration
	// Memory limits the memory of the sandbox (DefaultMemory): of all its
	// processes together, and of the files in its /tmp and /dev/shm, when
	// it has a cgroup; of each process's data otherwise.
	Memory int64
	// MaxOutput limits the size of the JSON result (DefaultMaxOutput).
	MaxOutput int64
	// TmpSize is the size of each of the private /tmp and /dev/shm, and
	// the largest file the code may write (DefaultTmpSize).
	TmpSize int64
	// TmpInodes is how many files and directories /tmp may hold
	// (DefaultTmpInodes); it applies where the server may mount (root).
	TmpInodes int
	// MaxProcs limits the processes and threads of the sandbox
	// (DefaultMaxProcs).
	MaxProcs int
	// noCgroup, set by tests, makes the sandbox use rlimits alone.
	noCgroup bool
	// Warm is how many sandboxes are kept started ahead of their runs
	// while the pool runs (see Start): DefaultWarm when zero, none when
	// negative.
	Warm int
	// Network, when set, lets code make HTTP and HTTPS requests (and other
	// TCP connections through CONNECT) via a proxy that dials with this
	// guard; HTTP_PROXY, HTTPS_PROXY and ALL_PROXY point at it inside the
	// sandbox. Nil, the default, leaves code without any network.
	Network *netguard.Guard
}

// Python runs python3 code in bubblewrap. It is safe for concurrent use;
// every run gets a sandbox of its own, used for nothing else.
type Python struct {
	bwrap string
	args  []string // bwrap's arguments, up to and including the runner
	cred  *syscall.Credential
	cfg   Config
	cg    *cgroups // nil: no usable cgroup, rlimits only
	cgErr error    // why cg is nil
	// probe runs prepare once; args, cg and cgErr are read only after it
	// returned. Its error (bwrap does not run) is every run's.
	probe func() error

	pool     atomic.Pointer[pool] // sandboxes started ahead; nil until Start
	warmRuns atomic.Int64         // runs served by a sandbox started ahead
}

// NewPython checks that bwrap and python3 exist and prepares the sandbox.
// It fails with ErrNoBubblewrap or ErrNoPython when either is missing. It
// does not run bwrap: that check, and the search for a cgroup, wait for
// Start or the first run (see prepare).
func NewPython(cfg Config) (*Python, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Memory <= 0 {
		cfg.Memory = DefaultMemory
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	if cfg.TmpSize <= 0 {
		cfg.TmpSize = DefaultTmpSize
	}
	if cfg.TmpInodes <= 0 {
		cfg.TmpInodes = DefaultTmpInodes
	}
	if cfg.MaxProcs <= 0 {
		cfg.MaxProcs = DefaultMaxProcs
	}
	if cfg.Warm == 0 {
		cfg.Warm = DefaultWarm
	}
	bwrap, err := findBwrap(cfg.Bwrap)
	if err != nil {
		return nil, err
	}
	cfg.Bwrap = bwrap
	python, err := findPython(cfg.Python)
	if err != nil {
		return nil, err
	}
	cfg.Python = python
	p := &Python{bwrap: bwrap, cfg: cfg}
	p.probe = sync.OnceValue(p.prepare)
	if os.Geteuid() == 0 {
		// As root, bwrap would give the sandbox a root identity on the
		// host, and the kernel does not apply RLIMIT_NPROC to root; start
		// bwrap as nobody instead (this needs unprivileged user namespaces,
		// which Debian allows).
		p.cred = &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}
	}
	return p, nil
}

// prepare asks bwrap which options it has and looks for a cgroup the
// sandboxes can get, then lays out bwrap's arguments. It runs bwrap once
// and reads the cgroup tree, some tens of milliseconds (more on a busy
// machine), so NewPython leaves it out: it runs once, from Start's
// background work or from the first run, whichever comes first (p.probe).
func (p *Python) prepare() error {
	help, err := bwrapHelp(p.bwrap)
	if err != nil {
		return err
	}
	switch {
	case p.cfg.noCgroup:
		p.cgErr = errors.New("turned off")
	case !isExecutable(gateShell):
		p.cgErr = fmt.Errorf("%s is missing", gateShell)
	default:
		p.cg, p.cgErr = detectCgroups()
	}
	p.args = buildArgs(p.cfg, help, limitsFor(p.cfg, p.cg))
	return nil
}

func findBwrap(path string) (string, error) {
	if path == "" {
		if found, err := exec.LookPath("bwrap"); err == nil {
			return found, nil
		}
		path = DefaultBwrap
	}
	if !isExecutable(path) {
		return "", ErrNoBubblewrap
	}
	return path, nil
}

func findPython(path string) (string, error) {
	if path == "" {
		if isExecutable(DefaultPython) {
			return DefaultPython, nil
		}
		found, err := exec.LookPath("python3")
		if err != nil {
			return "", ErrNoPython
		}
		// A shim from pyenv or a virtualenv is usually a link or a script
		// somewhere under $HOME; only a real interpreter under /usr works.
		if real, err := filepath.EvalSymlinks(found); err == nil {
			found = real
		}
		path = found
	}
	if !isExecutable(path) {
		return "", fmt.Errorf("%w (no executable at %s)", ErrNoPython, path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%w (%v)", ErrNoPython, err)
	}
	if !visible(real) {
		return "", fmt.Errorf("the python3 interpreter %s lives outside /usr, which is all the sandbox can see; use one under /usr (the Debian package python3 installs /usr/bin/python3)", path)
	}
	return path, nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// Args returns the bwrap command line of a run (without the runner's
// source), for logs and tests.
func (p *Python) Args() []string {
	out := []string{p.bwrap}
	if p.probe() != nil {
		return out
	}
	for _, a := range p.args {
		if a == runnerScript {
			a = "<runner>"
		}
		out = append(out, a)
	}
	return out
}

// request is what the runner reads from stdin.
type request struct {
	Code   string         `json:"code"`
	Inputs map[string]any `json:"inputs"`
}

// reply is the one line the runner writes.
type reply struct {
	Result map[string]any `json:"result"`
	Error  *struct {
		Kind    string `json:"kind"`
		Type    string `json:"type"`
		Message string `json:"message"`
		Line    int    `json:"line"`
		Source  string `json:"source"`
	} `json:"error"`
}

// CodeError is a failure of the code itself: a syntax error, an uncaught
// exception, a missing main, or a result that is not a JSON object.
type CodeError struct {
	// Type is the Python exception type, e.g. "ZeroDivisionError"; empty
	// when the protocol rather than Python found the problem.
	Type    string
	Message string
	// Line is the line of the code where it failed (0 when unknown) and
	// Source the text of that line.
	Line   int
	Source string
}

func (e *CodeError) Error() string {
	var b strings.Builder
	if e.Type != "" {
		b.WriteString(e.Type)
		if e.Message != "" {
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Message)
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d", e.Line)
		if e.Source != "" {
			b.WriteString(": ")
			b.WriteString(e.Source)
		}
		b.WriteString(")")
	}
	return b.String()
}

// limitError is a run stopped by one of the limits; it unwraps to
// ErrTimeout, ErrMemory or ErrOutputTooLarge.
type limitError struct {
	kind error
	msg  string
}

func (e *limitError) Error() string { return e.msg }
func (e *limitError) Unwrap() error { return e.kind }

// Run runs code in a new sandbox: main(**inputs) must return a dict, which
// comes back decoded from JSON (numbers as float64). Failures of the code
// come back as *CodeError; limits as errors wrapping ErrTimeout, ErrMemory
// or ErrOutputTooLarge; a cancelled ctx as an error wrapping ctx.Err().
//
// While the pool runs (Start), the sandbox is one started ahead and waiting
// for its request; otherwise, or when none is ready, one is started now.
// Either way a sandbox serves exactly one run.
func (p *Python) Run(ctx context.Context, code string, inputs map[string]any) (map[string]any, error) {
	if inputs == nil {
		inputs = map[string]any{}
	}
	in, err := json.Marshal(request{Code: code, Inputs: inputs})
	if err != nil {
		return nil, fmt.Errorf("the inputs cannot be passed to python as JSON: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("the code was not run: %w", err)
	}
	if s := p.pool.Load().take(); s != nil {
		if res, err, ok := p.finish(ctx, s, in, true); ok {
			p.warmRuns.Add(1)
			return res, err
		}
		// It died while it waited (killed from outside); a fresh one
		// runs the code instead.
	}
	s, err := p.spawn(context.Background())
	if err != nil {
		return nil, err
	}
	res, err, _ := p.finish(ctx, s, in, false)
	return res, err
}

// finish hands the request to the started sandbox s, waits for its answer
// and reads it. For a sandbox started ahead (warm), ok is false when it had
// ended without a word before it could read the request: the code never
// ran, and the caller runs it elsewhere.
//
// A run is over once its answer line is complete: the sandbox is then
// killed and reaped in the background, so the caller does not wait for its
// namespaces to be torn down (several milliseconds). Without a complete
// answer, finish waits for the sandbox to end to tell why.
func (p *Python) finish(ctx context.Context, s *started, in []byte, warm bool) (res map[string]any, err error, ok bool) {
	if !warm {
		// The time limit is the code's: a sandbox started for this run
		// first finishes starting (on a loaded machine that can take
		// longer than a short limit), as one started ahead already has.
		s.awaitReady(ctx)
	}
	runCtx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(runCtx, s.kill)
	defer stop()

	gone := s.ended()
	_, werr := s.stdin.Write(in)
	if cerr := s.stdin.Close(); werr == nil {
		werr = cerr
	}
	select {
	case <-s.stdout.answered:
		if rep, ok := parseReply(s.stdout.answer()); ok {
			// The kernel killing any process of the sandbox for memory
			// (a child, say) fails the run, whatever main returned.
			oom := s.cg != nil && s.cg.oomKills() > 0
			go s.close()
			if oom {
				return nil, p.outOfMemory(), true
			}
			res, err = p.fromReply(rep)
			return res, err, true
		}
	case <-s.exited:
	}
	s.close()
	if warm && (gone || werr != nil) && s.stdout.empty() && runCtx.Err() == nil {
		return nil, nil, false
	}
	res, err = p.answer(ctx, runCtx, s)
	return res, err, true
}

// startLimit bounds how long a run waits for its sandbox to start before
// its own time limit begins anyway.
const startLimit = 10 * time.Second

// awaitReady waits until the runner in s waits for its request, or s
// ended, or ctx ended, or startLimit passed; what happened then shows in
// the run itself.
func (s *started) awaitReady(ctx context.Context) {
	t := time.NewTimer(startLimit)
	defer t.Stop()
	select {
	case <-s.stdout.ready:
	case <-s.exited:
	case <-ctx.Done():
	case <-t.C:
	}
}

// parseReply reads the runner's answer line.
func parseReply(line []byte) (reply, bool) {
	var rep reply
	if len(line) == 0 || json.Unmarshal(line, &rep) != nil || (rep.Error == nil && rep.Result == nil) {
		return rep, false
	}
	return rep, true
}

// answer interprets what an ended sandbox wrote and how it ended.
func (p *Python) answer(ctx, runCtx context.Context, s *started) (map[string]any, error) {
	waitErr, stdout, stderr := s.waitErr, s.stdout, s.stderr
	if stdout.overflowed() {
		return nil, &limitError{ErrOutputTooLarge, fmt.Sprintf("the result is larger than %s", size(p.cfg.MaxOutput))}
	}
	line := stdout.answer()
	rep, ok := parseReply(line)
	if ctx.Err() == nil && s.usage.oomKills > 0 {
		// The cgroup's limit was reached and the kernel killed for it.
		return nil, p.outOfMemory()
	}
	if !ok {
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("the code was stopped: %w", context.Cause(ctx))
		case runCtx.Err() != nil:
			return nil, p.timedOut()
		case isSignal(waitErr, syscall.SIGXCPU):
			return nil, &limitError{ErrTimeout, fmt.Sprintf("the code ran longer than %s (it used up its CPU time)", p.cfg.Timeout)}
		}
		return nil, p.crashed(waitErr, stderr.String(), len(line) > 0)
	}
	return p.fromReply(rep)
}

// fromReply is the outcome a well-formed answer line names.
func (p *Python) fromReply(rep reply) (map[string]any, error) {
	if e := rep.Error; e != nil {
		switch e.Kind {
		case "memory":
			return nil, p.outOfMemory()
		case "setup":
			return nil, fmt.Errorf("the python sandbox failed: %s", e.Message)
		}
		return nil, &CodeError{Type: e.Type, Message: e.Message, Line: e.Line, Source: e.Source}
	}
	return rep.Result, nil
}

func (p *Python) timedOut() error {
	return &limitError{ErrTimeout, fmt.Sprintf("the code ran longer than %s", p.cfg.Timeout)}
}

func (p *Python) outOfMemory() error {
	return &limitError{ErrMemory, fmt.Sprintf("the code ran out of memory (the limit is %s)", size(p.cfg.Memory))}
}

// crashed explains a run that ended without a readable answer.
func (p *Python) crashed(waitErr error, stderr string, garbled bool) error {
	last := lastLine(stderr)
	sig, signaled := signalOf(waitErr)
	switch {
	case strings.HasPrefix(last, "bwrap:"):
		return fmt.Errorf("the python sandbox could not start: %s", last)
	case strings.Contains(stderr, "MemoryError") || strings.Contains(stderr, "Cannot allocate memory"):
		return p.outOfMemory()
	case signaled && sig == syscall.SIGKILL:
		// Not our kill (that would have ended runCtx): the hard CPU limit
		// after an ignored SIGXCPU, the kernel's OOM killer, or the code.
		return errors.New("python3 was killed (SIGKILL): the code used too much CPU time or memory, or killed itself")
	case garbled:
		return errors.New("the code wrote over the sandbox's answer, which could not be read")
	}
	msg := "python3 stopped without a result"
	switch {
	case signaled:
		msg += fmt.Sprintf(" (killed by signal %s)", sig)
	case waitErr != nil:
		msg += " (" + waitErr.Error() + ")"
	}
	if last != "" {
		msg += ": " + last
	}
	return errors.New(msg)
}

// signalOf tells which signal ended the sandboxed process, if one did.
func signalOf(err error) (syscall.Signal, bool) {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return 0, false
	case ws.Signaled():
		return ws.Signal(), true
	case ws.Exited() && ws.ExitStatus() > 128 && ws.ExitStatus() < 128+65:
		// bwrap passes a signal death on as the exit status 128+n.
		return syscall.Signal(ws.ExitStatus() - 128), true
	}
	return 0, false
}

func isSignal(err error, want syscall.Signal) bool {
	sig, ok := signalOf(err)
	return ok && sig == want
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// readyLine is the line the runner writes on stdout once it waits for its
// request; its answer is the line after it.
const readyLine = "ready"

// answerBuffer takes a sandbox's stdout: the ready line, then the answer
// line. It keeps up to max bytes of the answer. Past that it notes the
// overflow, calls full (which stops the sandbox) and drops the rest, so the
// writer never blocks. It is written by the goroutine copying the pipe and
// read by the run at the same time.
type answerBuffer struct {
	max      int
	full     func()
	ready    chan struct{} // closed once the first line has come
	answered chan struct{} // closed once a whole answer line has come

	mu     sync.Mutex
	buf    []byte // everything after the ready line
	head   []byte // output before the first newline
	first  bool   // the first line has come
	over   bool
	line   []byte // the complete answer line, set before answered closes
	closed bool   // answered is closed
}

func newAnswerBuffer(max int64, full func()) *answerBuffer {
	return &answerBuffer{max: int(max), full: full, ready: make(chan struct{}), answered: make(chan struct{})}
}

func (a *answerBuffer) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(p)
	if !a.first {
		i := bytes.IndexByte(p, '\n')
		if i < 0 && len(a.head)+len(p) <= len(readyLine) {
			a.head = append(a.head, p...)
			return n, nil
		}
		a.first = true
		close(a.ready)
		if i >= 0 && string(append(a.head, p[:i]...)) == readyLine {
			p = p[i+1:]
		} else {
			// No ready line (the runner failed before it got there):
			// all of it is the answer.
			p = append(a.head, p...)
		}
		a.head = nil
	}
	if a.over {
		return n, nil
	}
	if len(a.buf)+len(p) > a.max {
		a.over = true
		a.full()
		return n, nil
	}
	a.buf = append(a.buf, p...)
	if !a.closed {
		if i := bytes.IndexByte(a.buf, '\n'); i >= 0 {
			a.line = a.buf[:i:i]
			a.closed = true
			close(a.answered)
		}
	}
	return n, nil
}

// answer is the first line of the answer, whole or not.
func (a *answerBuffer) answer() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.line != nil {
		return a.line
	}
	out := a.buf
	if !a.first {
		out = a.head
	}
	line, _, _ := bytes.Cut(out, []byte("\n"))
	return line
}

// empty reports whether nothing but the ready line came.
func (a *answerBuffer) empty() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.buf) == 0 && len(a.head) == 0 && !a.over
}

func (a *answerBuffer) overflowed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.over
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }
