package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// An appkb server that is killed outright (SIGKILL, an out-of-memory kill)
// while bwrap sets up a sandbox cannot kill the sandbox's process group:
// the outer bwrap dies with the server (its parent-death signal), and the
// inner one, pid 1 of the sandbox's pid namespace, waits for ever for a
// setup that will not finish (bwrap 0.8 arms its own parent-death signal
// only afterwards). sweepOrphans, run when the pool starts, ends those.

// orphan is what /proc says of one process, as far as sweepOrphans needs.
type orphan struct {
	exe     string
	ppid    int
	cmdline []byte // NUL-separated arguments
	ownNS   bool   // in the same pid namespace as this server
}

// isLeakedSandbox reports whether p is the inner bwrap of an appkb sandbox
// whose outer bwrap is gone. A live sandbox's inner bwrap has the outer one
// as its parent; an outer bwrap lives in the server's own pid namespace
// and is left alone even when it has lost its server.
func isLeakedSandbox(p orphan, bwrap string) bool {
	if p.exe != bwrap || p.ppid != 1 || p.ownNS {
		return false
	}
	for arg := range bytes.SplitSeq(p.cmdline, []byte{0}) {
		if bytes.HasPrefix(arg, []byte(runnerMarker)) {
			return true
		}
	}
	return false
}

// sweepOrphans kills the leaked sandboxes of bwrap (see isLeakedSandbox)
// that this process may signal, and returns their pids. Processes it cannot
// read are skipped.
func sweepOrphans(bwrap string) []int {
	ours, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return nil
	}
	var killed []int
	for pid, p := range procs(ours) {
		if isLeakedSandbox(p, bwrap) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// procs yields the processes /proc lists, as readProc reads them against
// the pid namespace ourNS; those it cannot read are left out.
func procs(ourNS string) iter.Seq2[int, orphan] {
	return func(yield func(int, orphan) bool) {
		dirs, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		for _, d := range dirs {
			pid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			if p, ok := readProc(pid, ourNS); ok && !yield(pid, p) {
				return
			}
		}
	}
}

// readProc reads what isLeakedSandbox looks at; ok is false when any of it
// cannot be read (the process left, or belongs to someone else).
func readProc(pid int, ourNS string) (p orphan, ok bool) {
	dir := fmt.Sprintf("/proc/%d/", pid)
	var err error
	if p.exe, err = os.Readlink(dir + "exe"); err != nil {
		return p, false
	}
	status, err := os.ReadFile(dir + "status")
	if err != nil {
		return p, false
	}
	for line := range strings.Lines(string(status)) {
		if v, found := strings.CutPrefix(line, "PPid:"); found {
			p.ppid, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	ns, err := os.Readlink(dir + "ns/pid")
	if err != nil {
		return p, false
	}
	p.ownNS = ns == ourNS
	if p.cmdline, err = os.ReadFile(dir + "cmdline"); err != nil {
		return p, false
	}
	return p, true
}

// sweepProxyDirs removes the socket directories of network proxies that a
// server killed outright left in tmp, and returns them. A directory named
// after a live server stays. One of an older server, without a pid in its
// name, goes when nothing listens on its socket any more.
func sweepProxyDirs(tmp string) []string {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil
	}
	var swept []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), proxyDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		if pidText, _, named := strings.Cut(rest, "-"); named {
			pid, err := strconv.Atoi(pidText)
			if err != nil || pid <= 0 || serverAlive(pid) {
				continue
			}
		} else if !abandonedSocketDir(dir) {
			continue
		}
		if os.RemoveAll(dir) == nil {
			swept = append(swept, dir)
		}
	}
	return swept
}

// abandonedSocketDir tells whether nobody listens on the proxy socket in
// dir. A directory without a socket counts as abandoned only once it is a
// minute old: a proxy creates the directory a moment before the socket.
func abandonedSocketDir(dir string) bool {
	sock := filepath.Join(dir, "proxy.sock")
	if _, err := os.Lstat(sock); err != nil {
		st, err := os.Stat(dir)
		return err == nil && time.Since(st.ModTime()) > time.Minute
	}
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
