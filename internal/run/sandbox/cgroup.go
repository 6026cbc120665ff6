package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Each sandbox gets a control group of its own, so its memory (every
// process in it, and the files of its tmpfs, which the kernel charges to
// the group that wrote them) and its number of tasks are limited as a
// whole. An rlimit only bounds each process: eight forked children of
// 200 MB each passed a 256 MB address-space limit with 1.6 GB together.
//
// Both layouts are supported: the unified hierarchy (cgroup v2), when the
// server's own group offers the memory and pids controllers, and the
// separate v1 memory and pids hierarchies. Without either (not root, no
// such controller) the sandbox falls back to per-process rlimits.

// cgroupPrefix names the groups of sandboxes: appkb-sandbox-<server pid>-<n>.
// The pid lets a later server tell the leftovers of a dead one (see
// sweepCgroups).
const cgroupPrefix = "appkb-sandbox-"

// cgroups is where this server creates the groups of its sandboxes.
type cgroups struct {
	v2 bool
	// mem and pids are the parent directories of the sandboxes' groups:
	// one directory under v2, the two v1 hierarchies otherwise (pids may
	// be "" under v1 when that controller is missing).
	mem, pids string
}

func (c *cgroups) String() string {
	if c.v2 {
		return "cgroup v2 at " + c.mem
	}
	if c.pids == "" {
		return "cgroup v1 memory at " + c.mem
	}
	return "cgroup v1 memory at " + c.mem + ", pids at " + c.pids
}

// parents lists the distinct parent directories.
func (c *cgroups) parents() []string {
	if c.v2 || c.pids == "" {
		return []string{c.mem}
	}
	return []string{c.mem, c.pids}
}

// sandboxCgroup is the group (one directory under v2, one per hierarchy
// under v1) that holds one sandbox.
type sandboxCgroup struct {
	v2        bool
	mem, pids string // the group's directories; pids "" without that controller
	removed   atomic.Bool
}

var cgroupSeq atomic.Int64

// detectCgroups finds a usable cgroup layout once per process: the
// server's own group in the v2 tree when it offers memory and pids, else
// its groups in the v1 memory (and pids) hierarchies. It tries to create
// and remove a probe group, so a layout it returns is writable.
var detectCgroups = sync.OnceValues(func() (*cgroups, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	var errs []error
	if m, ok := mounts["2"]; ok {
		if p, ok := own["2"]; ok {
			c, err := setupV2(m.dir(p))
			if err == nil {
				return c, nil
			}
			errs = append(errs, fmt.Errorf("cgroup v2: %w", err))
		}
	}
	mm, okm := mounts["memory"]
	mp, okp := own["memory"]
	if okm && okp {
		c := &cgroups{mem: mm.dir(mp)}
		if pm, ok := mounts["pids"]; ok {
			if pp, ok := own["pids"]; ok {
				c.pids = pm.dir(pp)
			}
		}
		err := probe(c)
		if err != nil && c.pids != "" {
			// Memory alone is still worth having.
			c.pids = ""
			if probe(c) == nil {
				return c, nil
			}
		}
		if err == nil {
			return c, nil
		}
		errs = append(errs, fmt.Errorf("cgroup v1: %w", err))
	}
	if len(errs) == 0 {
		return nil, errors.New("no cgroup hierarchy offers the memory controller")
	}
	return nil, errors.Join(errs...)
})

// cgroupMount is one mounted hierarchy: where it is mounted and which of
// its paths the mount shows at that point.
type cgroupMount struct{ point, root string }

func (m cgroupMount) dir(cgPath string) string {
	rel := cgPath
	if m.root != "/" {
		rel = strings.TrimPrefix(cgPath, m.root)
	}
	return filepath.Join(m.point, rel)
}

// cgroupMounts reads /proc/self/mountinfo: the v2 mount as "2", v1 mounts
// under the names of their memory and pids controllers.
func cgroupMounts() (map[string]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMountinfo(f)
}

func parseMountinfo(r io.Reader) (map[string]cgroupMount, error) {
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 {
			continue
		}
		m := cgroupMount{point: unescapeMount(fields[4]), root: unescapeMount(fields[3])}
		switch tail[0] {
		case "cgroup2":
			if _, seen := out["2"]; !seen {
				out["2"] = m
			}
		case "cgroup":
			for opt := range strings.SplitSeq(tail[2], ",") {
				if opt == "memory" || opt == "pids" {
					if _, seen := out[opt]; !seen {
						out[opt] = m
					}
				}
			}
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes of mountinfo (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroups reads /proc/self/cgroup: "2" for the unified group, else the
// v1 controller names.
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	return parseProcCgroup(data), nil
}

func parseProcCgroup(data []byte) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out["2"] = parts[2]
			continue
		}
		for ctl := range strings.SplitSeq(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out
}

// setupV2 makes dir able to hold sandbox groups with memory and pids
// limits. The kernel lets a group other than the root hand controllers to
// its children only while it holds no processes itself; when the server's
// own group holds processes, the server moves into a leaf group of its own
// (appkb-server) first, which is the layout systemd expects of a service
// with Delegate=yes.
func setupV2(dir string) (*cgroups, error) {
	ctl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	have := strings.Fields(string(ctl))
	for _, want := range []string{"memory", "pids"} {
		if !slices.Contains(have, want) {
			return nil, fmt.Errorf("the group %s does not offer the %s controller", dir, want)
		}
	}
	enable := func() error {
		return writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory +pids")
	}
	if err := enable(); err != nil {
		if !errors.Is(err, syscall.EBUSY) {
			return nil, err
		}
		leaf := filepath.Join(dir, "appkb-server")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		// Every process of the group moves, not just this one: another
		// one left behind would keep the controllers off.
		for _, pid := range cgroupPids(dir) {
			if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(pid)); err != nil && !errors.Is(err, syscall.ESRCH) {
				return nil, err
			}
		}
		if err := enable(); err != nil {
			return nil, err
		}
		slog.Info("python sandbox: the server moved into its own cgroup so sandboxes can get groups beside it", "cgroup", leaf)
	}
	c := &cgroups{v2: true, mem: dir, pids: dir}
	if err := probe(c); err != nil {
		return nil, err
	}
	return c, nil
}

// probe creates and removes a group with limits, to see that it works.
func probe(c *cgroups) error {
	g, err := c.create(64<<20, 8)
	if err != nil {
		return err
	}
	g.remove()
	return nil
}

// create makes the group of a new sandbox with its limits: memory bytes
// (with no swap on top) and tasks (processes and threads).
func (c *cgroups) create(memory int64, tasks int) (*sandboxCgroup, error) {
	name := fmt.Sprintf("%s%d-%d", cgroupPrefix, os.Getpid(), cgroupSeq.Add(1))
	g := &sandboxCgroup{v2: c.v2, mem: filepath.Join(c.mem, name)}
	if c.pids != "" {
		g.pids = filepath.Join(c.pids, name)
	}
	fail := func(err error) (*sandboxCgroup, error) {
		g.remove()
		return nil, fmt.Errorf("the sandbox's cgroup could not be set up: %w", err)
	}
	for _, d := range g.dirs() {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(err)
		}
	}
	mem := strconv.FormatInt(memory, 10)
	if c.v2 {
		if err := writeFile(filepath.Join(g.mem, "memory.max"), mem); err != nil {
			return fail(err)
		}
		// Swap would let the group hold more than its limit; the file is
		// absent when the kernel has no swap accounting.
		if err := writeFile(filepath.Join(g.mem, "memory.swap.max"), "0"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(err)
		}
		// When the kernel kills one process for memory, it kills the whole
		// sandbox: a run is over either way.
		_ = writeFile(filepath.Join(g.mem, "memory.oom.group"), "1")
	} else {
		if err := writeFile(filepath.Join(g.mem, "memory.limit_in_bytes"), mem); err != nil {
			return fail(err)
		}
		// memory and swap together; it must not be below the first limit,
		// so it comes after it.
		if err := writeFile(filepath.Join(g.mem, "memory.memsw.limit_in_bytes"), mem); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(err)
		}
	}
	if g.pids != "" {
		if err := writeFile(filepath.Join(g.pids, "pids.max"), strconv.Itoa(tasks)); err != nil {
			return fail(err)
		}
	}
	return g, nil
}

func (g *sandboxCgroup) dirs() []string {
	if g.pids == "" || g.pids == g.mem {
		return []string{g.mem}
	}
	return []string{g.mem, g.pids}
}

// add moves the process pid (with its threads) into the group.
func (g *sandboxCgroup) add(pid int) error {
	for _, d := range g.dirs() {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("the sandbox could not be moved into its cgroup: %w", err)
		}
	}
	return nil
}

// oomKills is how many processes of the group the kernel killed for
// memory.
func (g *sandboxCgroup) oomKills() int64 {
	name := "memory.oom_control" // v1 keeps the count among its settings
	if g.v2 {
		name = "memory.events"
	}
	return keyedValue(filepath.Join(g.mem, name), "oom_kill")
}

// peak is the most memory the group has held, in bytes (0 when the kernel
// does not say).
func (g *sandboxCgroup) peak() int64 {
	name := "memory.max_usage_in_bytes"
	if g.v2 {
		name = "memory.peak"
	}
	data, err := os.ReadFile(filepath.Join(g.mem, name))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// pidsRefused is how many forks the task limit refused.
func (g *sandboxCgroup) pidsRefused() int64 {
	if g.pids == "" {
		return 0
	}
	return keyedValue(filepath.Join(g.pids, "pids.events"), "max")
}

// remove kills whatever still runs in the group and removes it. A killed
// sandbox can take a while to be gone (the kernel frees a /tmp of 300 000
// files in seconds, and the group stays busy until then): what is not
// removed within a moment is removed in the background. It may be called
// more than once.
func (g *sandboxCgroup) remove() {
	if g == nil || g.removed.Swap(true) {
		return
	}
	left := removeCgroup(time.Now().Add(200*time.Millisecond), g.dirs()...)
	if len(left) == 0 {
		return
	}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				slog.Error("python sandbox: panic while removing a cgroup", "panic", v)
			}
		}()
		if left := removeCgroup(time.Now().Add(2*time.Minute), left...); len(left) > 0 {
			slog.Warn("python sandbox: cgroups could not be removed; the next start removes them", "cgroups", left)
		}
	}()
}

// removeCgroup empties and removes group directories: cgroup.kill where
// the kernel has it (v2), else SIGKILL to every listed process, then
// rmdir, retried until deadline while the killed processes are still on
// their way out. It returns the directories still there.
func removeCgroup(deadline time.Time, dirs ...string) []string {
	var left []string
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		killed := writeFile(filepath.Join(d, "cgroup.kill"), "1") == nil
		for wait := 100 * time.Microsecond; ; wait = min(wait*2, 100*time.Millisecond) {
			if !killed {
				for _, pid := range cgroupPids(d) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				left = append(left, d)
				break
			}
			time.Sleep(wait)
		}
	}
	return left
}

// cgroupPids lists the processes in a group.
func cgroupPids(dir string) []int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// keyedValue reads "key value" from a flat-keyed cgroup file.
func keyedValue(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// writeFile writes one value to a cgroup file, which takes it whole in a
// single write or refuses it.
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// sweepCgroups removes the sandbox groups that a server which is gone left
// behind (killed outright, it could not remove them), with whatever still
// runs in them, and returns their names. Groups of live servers, this one
// included, stay.
func sweepCgroups(c *cgroups) []string {
	if c == nil {
		return nil
	}
	var swept []string
	for _, parent := range c.parents() {
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			pid, ok := cgroupOwner(e.Name())
			if !e.IsDir() || !ok || serverAlive(pid) {
				continue
			}
			d := filepath.Join(parent, e.Name())
			if len(removeCgroup(time.Now().Add(5*time.Second), d)) == 0 {
				swept = append(swept, d)
			}
		}
	}
	return swept
}

// cgroupOwner is the server pid in a sandbox group's name.
func cgroupOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, cgroupPrefix)
	if !ok {
		return 0, false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil && pid > 0
}

// serverAlive tells whether the process pid (a server that named a group
// or a directory after itself) still runs. A pid reused by an unrelated
// process counts as alive: its leftovers then wait for a later sweep.
func serverAlive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
