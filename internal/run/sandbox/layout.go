package sandbox

// How a sandbox is laid out: the host directories bwrap binds read-only,
// the per-process limits the runner sets on itself, and bwrap's command
// line built from both.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// visible tells whether a host path (symbolic links resolved) is inside
// the directories the sandbox binds.
func visible(path string) bool {
	for _, dir := range systemDirs() {
		if dir.link == "" && (path == dir.path || strings.HasPrefix(path, dir.path+"/")) {
			return true
		}
	}
	return false
}

// systemDir is one top-level system directory as the host has it: bound
// read-only, or recreated as the same symbolic link (on merged-/usr
// systems /bin, /lib… point into /usr).
type systemDir struct {
	path string
	link string // the link's target, or "" for a real directory
}

var systemDirs = sync.OnceValue(func() []systemDir {
	dirs := []systemDir{{path: "/usr"}}
	for _, p := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		st, err := os.Lstat(p)
		switch {
		case err != nil:
		case st.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				dirs = append(dirs, systemDir{path: p, link: target})
			}
		case st.IsDir():
			dirs = append(dirs, systemDir{path: p})
		}
	}
	return dirs
})

// bwrapHelp runs bwrap --help, both to see that bwrap starts at all and
// to find which optional flags this version knows.
func bwrapHelp(bwrap string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap, "--help")
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return "", ErrNoBubblewrap
		}
		return "", fmt.Errorf("bubblewrap (%s) does not run: %v", bwrap, err)
	}
	return string(out), nil
}

// rlimits are the per-process limits the runner sets on itself; -1 is no
// limit.
type rlimits struct {
	data, as, nproc int64
}

// limitsFor picks the rlimits. With a cgroup, the group's memory and task
// limits are the real ones and the rlimits only stop the absurd (a single
// terabyte allocation fails with MemoryError instead of waiting for the
// kernel): the data limit sits far above the group's, and the address
// space is left alone, because threads and malloc arenas reserve far more
// of it than they use (httpx over TLS reserved 326 MB while using 49 MB,
// and failed under a 256 MB address-space limit). Without a cgroup, the
// data limit (private writable memory that is actually mapped for use,
// not reservations) is the memory limit, and the address space gets the
// generous bound.
func limitsFor(cfg Config, cg *cgroups) rlimits {
	backstop := max(4*cfg.Memory, cfg.Memory+1<<30)
	l := rlimits{data: cfg.Memory, as: backstop, nproc: int64(cfg.MaxProcs)}
	if cg != nil {
		l.data, l.as = backstop, -1
		if cg.pids != "" {
			// The group counts this sandbox's tasks alone; the rlimit counts
			// every process of the sandbox's user.
			l.nproc = 8 * int64(cfg.MaxProcs)
		}
	}
	return l
}

// buildArgs lays out the sandbox: new user, pid, ipc, uts, network and
// (when possible) cgroup namespaces; no capabilities; an empty root with
// /usr and the few files the dynamic loader wants bound read-only; fresh
// /dev, /proc, and size-limited /tmp and /dev/shm, the only writable
// places; a cleared environment.
func buildArgs(cfg Config, help string, lim rlimits) []string {
	a := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--uid", strconv.Itoa(nobody), "--gid", strconv.Itoa(nobody),
		"--hostname", "sandbox",
		"--cap-drop", "ALL",
		"--die-with-parent", "--new-session",
		"--clearenv",
		"--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
		"--setenv", "HOME", "/tmp",
		"--setenv", "TMPDIR", "/tmp",
		"--setenv", "LANG", "C.UTF-8",
		"--setenv", "PYTHONIOENCODING", "utf-8",
	}
	if strings.Contains(help, "--disable-userns") {
		// The code may not build user namespaces of its own, where it
		// would hold capabilities again.
		a = append(a, "--disable-userns")
	}
	for _, d := range systemDirs() {
		if d.link != "" {
			a = append(a, "--symlink", d.link, d.path)
		} else {
			a = append(a, "--ro-bind", d.path, d.path)
		}
	}
	for _, f := range []string{"/etc/ld.so.cache", "/etc/localtime"} {
		a = append(a, "--ro-bind-try", f, f)
	}
	if cfg.Network != nil {
		// Certificate authorities, so https can be verified.
		a = append(a, caBinds()...)
	}
	tmpfs := func(dir string) {
		if strings.Contains(help, "--size") {
			a = append(a, "--size", strconv.FormatInt(cfg.TmpSize, 10))
		}
		a = append(a, "--tmpfs", dir)
	}
	tmpfs("/tmp")
	a = append(a, "--dev", "/dev")
	tmpfs("/dev/shm") // POSIX semaphores and shared memory live here
	a = append(a,
		"--proc", "/proc",
		// bwrap builds the root and /dev as writable tmpfs mounts without
		// a size limit; freeze both, so only /tmp and /dev/shm take writes.
		"--remount-ro", "/dev",
		"--remount-ro", "/",
		"--chdir", "/tmp",
		cfg.Python, "-I", "-B", "-c", runnerScript,
		strconv.FormatInt(cpuSeconds(cfg.Timeout), 10),
		strconv.FormatInt(lim.data, 10),
		strconv.FormatInt(lim.as, 10),
		strconv.FormatInt(lim.nproc, 10),
		strconv.FormatInt(cfg.TmpSize, 10),
		strconv.Itoa(DefaultMaxFiles),
	)
	return a
}

// caBinds binds the host's certificate authorities read-only: the
// directory OpenSSL and Debian's certifi look in (certifi names its
// ca-certificates.crt bundle), OpenSSL's configuration, and, where the
// bundle is a link into a directory the sandbox does not see otherwise,
// that directory too. The private keys beside them stay out.
func caBinds() []string {
	var a []string
	bound := map[string]bool{}
	bind := func(p string) {
		if bound[p] {
			return
		}
		if _, err := os.Stat(p); err == nil {
			bound[p] = true
			a = append(a, "--ro-bind", p, p)
		}
	}
	for _, p := range []string{"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ssl/cert.pem", "/etc/pki/tls/certs", "/etc/pki/ca-trust"} {
		bind(p)
	}
	for _, f := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/cert.pem"} {
		real, err := filepath.EvalSymlinks(f)
		if err != nil || visible(real) {
			continue
		}
		dir := filepath.Dir(real)
		covered := false
		for p := range bound {
			if dir == p || strings.HasPrefix(dir, p+"/") {
				covered = true
			}
		}
		if !covered && strings.HasPrefix(dir, "/etc/") {
			bind(dir)
		}
	}
	return a
}

// cpuSeconds is the CPU-time limit for a wall-clock limit: a little more,
// so that the wall clock normally decides and the CPU limit only catches
// a sandbox the wall clock somehow missed.
func cpuSeconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds())) + 1
}
