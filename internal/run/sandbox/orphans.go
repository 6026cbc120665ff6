package sandbox

import (
	"bytes"
	"fmt"
	"iter"
	"os"
	"strconv"
	"strings"
	"syscall"
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
