package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// DefaultWarm is how many sandboxes the pool keeps started ahead.
const DefaultWarm = 2

// started is one sandbox whose bwrap and python3 are running: the runner
// has lowered its limits, imported its modules and waits on stdin for its
// one request. Nothing of a run's code has executed in it yet.
type started struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *answerBuffer
	stderr *tailBuffer
	proxy  *netProxy      // nil without network
	cg     *sandboxCgroup // nil without a cgroup
	tmp    *privateTmp    // the mounted /tmp; nil when bwrap makes it
	kill   context.CancelFunc

	closeOnce sync.Once
	usage     cgroupUsage // what the cgroup recorded; set by close

	exited  chan struct{} // closed once cmd.Wait has returned
	waitErr error         // what Wait returned; read after exited
}

// cgroupUsage is what a sandbox's cgroup counted by the time it ended.
type cgroupUsage struct {
	oomKills    int64 // processes the kernel killed for memory
	peak        int64 // the most memory the sandbox held, in bytes
	pidsRefused int64 // forks refused by the task limit
}

// gateShell runs the small gate a sandbox with a cgroup starts behind:
// the shell waits on fd 3 until the server has moved it into the
// sandbox's cgroup, then becomes bwrap. Nothing of the sandbox (not even
// bwrap's first child) can start outside its group, and a gate whose pipe
// closes without the go-ahead exits instead.
const (
	gateShell  = "/bin/sh"
	gateScript = `read -r _ <&3 || exit 125; exec 3<&-; exec "$@"`
)

// spawn starts a sandbox that waits for its request. It ends when parent
// ends, or when kill is called.
func (p *Python) spawn(parent context.Context) (*started, error) {
	if err := p.probe(); err != nil {
		return nil, err
	}
	ctx, kill := context.WithCancel(parent)
	args := p.args
	var proxy *netProxy
	if p.cfg.Network != nil {
		var owner *int
		if p.cred != nil {
			uid := int(p.cred.Uid)
			owner = &uid
		}
		var err error
		if proxy, err = startProxy(p.cfg.Network, owner); err != nil {
			kill()
			return nil, err
		}
		args = append([]string{"--ro-bind", proxy.path, proxySocket}, p.args...)
	}
	tmp, err := mountTmp(p.cfg.TmpSize, p.cfg.TmpInodes)
	if err != nil {
		kill()
		if proxy != nil {
			proxy.close()
		}
		return nil, err
	}
	if tmp != nil {
		args = withPrivateTmp(args, tmp.dir)
	}
	abort := func() {
		kill()
		if proxy != nil {
			proxy.close()
		}
		tmp.remove()
	}
	var cg *sandboxCgroup
	name, argv := p.bwrap, args
	var gateR, gateW *os.File
	if p.cg != nil {
		// The shell would start and then fail to run a missing bwrap.
		if !isExecutable(p.bwrap) {
			abort()
			return nil, ErrNoBubblewrap
		}
		var err error
		if cg, err = p.cg.create(p.cfg.Memory, p.cfg.MaxProcs); err != nil {
			abort()
			return nil, err
		}
		if gateR, gateW, err = os.Pipe(); err != nil {
			cg.remove()
			abort()
			return nil, fmt.Errorf("the python sandbox could not start: %w", err)
		}
		name, argv = gateShell, append([]string{"-c", gateScript, "sh", p.bwrap}, args...)
	}
	s := &started{proxy: proxy, cg: cg, tmp: tmp, kill: kill, exited: make(chan struct{})}
	s.stdout = newAnswerBuffer(p.cfg.MaxOutput+1, kill) // +1: the newline
	s.stderr = &tailBuffer{max: 4 << 10}
	cmd := p.sandboxCommand(ctx, name, argv, s)
	if gateR != nil {
		cmd.ExtraFiles = []*os.File{gateR} // fd 3
	}
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if gateR != nil {
		gateR.Close()
	}
	if err == nil && cg != nil {
		if err = cg.add(cmd.Process.Pid); err == nil {
			_, err = gateW.Write([]byte("go\n"))
		}
		gateW.Close()
		if err != nil {
			kill()
			_ = cmd.Wait()
			cg.remove()
			if proxy != nil {
				proxy.close()
			}
			tmp.remove()
			return nil, fmt.Errorf("the python sandbox could not start: %w", err)
		}
	} else if gateW != nil {
		gateW.Close()
	}
	if err != nil {
		cg.remove()
		abort()
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, ErrNoBubblewrap
		}
		return nil, fmt.Errorf("the python sandbox could not start: %w", err)
	}
	s.cmd, s.stdin = cmd, stdin
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// sandboxCommand prepares the command that starts sandbox s: an empty
// environment, output into s's buffers, and a process group of its own
// that is killed whole when ctx ends.
func (p *Python) sandboxCommand(ctx context.Context, name string, argv []string, s *started) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Dir = "/"
	cmd.Env = []string{}
	cmd.Stdout = s.stdout
	cmd.Stderr = s.stderr
	// bwrap runs in a process group of its own, and the group is killed
	// whole: bwrap 0.8 leaves the sandbox's inner bwrap waiting for ever
	// when the outer one is killed before the sandbox is set up, and
	// until then the inner one is still in the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Cancel = func() error {
		// As Process.Kill does, a group that is already gone is no error
		// of Wait's.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return os.ErrProcessDone
	}
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// ended reports whether the sandbox has already exited.
func (s *started) ended() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// close kills the sandbox if it still runs, waits for it, notes what its
// cgroup counted and removes the group (with anything still in it), and
// closes its network proxy. Its stdin is closed first: a python3 that a
// kill of bwrap in its first moments left behind then reads the end of its
// request and leaves, rather than holding the output pipes until Wait
// gives up. Calls after the first wait for it and do nothing more.
func (s *started) close() {
	s.closeOnce.Do(func() {
		s.stdin.Close()
		s.kill()
		<-s.exited
		if s.cg != nil {
			s.usage = cgroupUsage{oomKills: s.cg.oomKills(), peak: s.cg.peak(), pidsRefused: s.cg.pidsRefused()}
			s.cg.remove()
		}
		if s.proxy != nil {
			s.proxy.close()
		}
		s.tmp.remove()
	})
}

// pool keeps sandboxes started ahead of the runs that will use them, so a
// run does not wait for bwrap to build the sandbox and for python3 to start
// and import the runner's modules (about 45 ms here against about 2 ms for
// the run itself). Each sandbox still serves a single run and is thrown
// away after it, so runs share nothing. The zero value (and a nil *pool) is
// a pool that is not running: take finds nothing.
type pool struct {
	mu    sync.Mutex
	ready []*started
	size  int
	need  chan struct{} // wakes the filler; buffered, one pending wake is enough
	stop  context.CancelFunc
	done  chan struct{} // closed when the filler has returned
}

// take returns a started sandbox, or nil when none is ready.
func (pl *pool) take() *started {
	if pl == nil {
		return nil
	}
	pl.mu.Lock()
	var s *started
	if n := len(pl.ready); n > 0 {
		// The oldest first: it has had the longest to get ready.
		s = pl.ready[0]
		pl.ready = append(pl.ready[:0], pl.ready[1:]...)
	}
	pl.mu.Unlock()
	if s != nil {
		select {
		case pl.need <- struct{}{}:
		default:
		}
	}
	return s
}

// Start keeps Config.Warm sandboxes started ahead of their runs until Stop.
// It returns at once: in the background it first ends sandboxes a server
// killed outright left behind (see sweepOrphans), checks bwrap and looks
// for a cgroup (prepare), and then fills the pool. The pool does not run
// when Config.Warm is negative, and a second Start leaves the running pool
// alone.
func (p *Python) Start(ctx context.Context) {
	var pl *pool
	if p.cfg.Warm >= 0 {
		ctx, cancel := context.WithCancel(ctx)
		pl = &pool{size: p.cfg.Warm, need: make(chan struct{}, 1), stop: cancel, done: make(chan struct{})}
		if !p.pool.CompareAndSwap(nil, pl) {
			cancel()
			return
		}
		go func() {
			p.sweep()
			p.fill(ctx, pl)
		}()
		return
	}
	go p.sweep()
}

// sweep removes what servers that were killed left behind, and says how
// the sandboxes will be limited. It leaves this server's own sandboxes,
// groups and proxies alone, so runs may go on meanwhile.
func (p *Python) sweep() {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("python sandbox: panic while starting", "panic", v)
		}
	}()
	if pids := sweepOrphans(p.bwrap); len(pids) > 0 {
		slog.Warn("python sandbox: ended sandboxes left waiting by a server that was killed", "pids", pids)
	}
	if dirs := sweepTmpMounts(os.TempDir()); len(dirs) > 0 {
		slog.Warn("python sandbox: unmounted /tmp filesystems left by a server that was killed", "dirs", dirs)
	}
	if dirs := sweepProxyDirs(os.TempDir()); len(dirs) > 0 {
		slog.Warn("python sandbox: removed network proxy directories left by a server that was killed", "dirs", dirs)
	}
	if err := p.probe(); err != nil {
		slog.Warn("python3 code nodes are unavailable", "err", err)
		return
	}
	if groups := sweepCgroups(p.cg); len(groups) > 0 {
		slog.Warn("python sandbox: removed cgroups left by a server that was killed", "cgroups", groups)
	}
	if p.cg == nil {
		slog.Info("python sandbox: no usable cgroup (it takes root and the memory controller); memory and processes are limited per process only", "reason", p.cgErr)
	} else {
		slog.Debug("python sandbox: memory and processes are limited per sandbox", "cgroups", p.cg.String())
	}
}

// Stop ends the pool: no more sandboxes are started, and those waiting for
// a run are killed. Runs in progress are not affected.
func (p *Python) Stop() {
	pl := p.pool.Swap(nil)
	if pl == nil {
		return
	}
	pl.stop()
	<-pl.done
	pl.mu.Lock()
	idle := pl.ready
	pl.ready = nil
	pl.mu.Unlock()
	for _, s := range idle {
		s.close()
	}
}

// fill starts sandboxes whenever the pool holds fewer than its size. When
// one cannot start, it waits a while before it tries again; runs meanwhile
// start their own sandbox and report why it fails.
func (p *Python) fill(ctx context.Context, pl *pool) {
	defer close(pl.done)
	defer func() {
		if v := recover(); v != nil {
			slog.Error("python sandbox pool: panic", "panic", v)
		}
	}()
	for {
		for {
			pl.mu.Lock()
			short := len(pl.ready) < pl.size
			pl.mu.Unlock()
			if !short || ctx.Err() != nil {
				break
			}
			// The sandbox outlives the pool's context: Stop kills those
			// still waiting, and one a run has taken ends with its run.
			s, err := p.spawn(context.WithoutCancel(ctx))
			if err != nil {
				slog.Warn("python sandbox pool: a sandbox could not be started ahead", "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(5 * time.Second):
				}
				continue
			}
			pl.mu.Lock()
			pl.ready = append(pl.ready, s)
			pl.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-pl.need:
		}
	}
}
