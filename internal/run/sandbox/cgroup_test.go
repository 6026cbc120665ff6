package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain removes, once the tests are done, the cgroups of sandboxes
// whose removal was still under way in the background.
func TestMain(m *testing.M) {
	code := m.Run()
	if c, err := detectCgroups(); err == nil {
		for _, parent := range c.parents() {
			entries, _ := os.ReadDir(parent)
			for _, e := range entries {
				if pid, ok := cgroupOwner(e.Name()); ok && pid == os.Getpid() {
					removeCgroup(time.Now().Add(30*time.Second), filepath.Join(parent, e.Name()))
				}
			}
		}
	}
	os.Exit(code)
}

// needCgroups returns the cgroup layout, or skips: a server that may not
// create cgroups (not root, no memory controller) falls back to rlimits,
// which TestLimits covers on its own.
func needCgroups(t *testing.T) *cgroups {
	t.Helper()
	c, err := detectCgroups()
	if err != nil {
		t.Skipf("no usable cgroup here: %v", err)
	}
	return c
}

// runIn runs code in a sandbox started for it and returns the outcome
// with what the sandbox's cgroup counted, once the sandbox is gone.
func runIn(t *testing.T, p *Python, code string, inputs map[string]any) (map[string]any, error, cgroupUsage) {
	t.Helper()
	if inputs == nil {
		inputs = map[string]any{}
	}
	in, err := json.Marshal(request{Code: code, Inputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.spawn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.cg == nil {
		t.Fatal("the sandbox has no cgroup")
	}
	res, err, _ := p.finish(context.Background(), s, in, false)
	s.close()
	// The group goes once the kernel is done with the killed sandbox,
	// in the background if that takes a while.
	for _, d := range s.cg.dirs() {
		deadline := time.Now().Add(time.Minute)
		for {
			_, serr := os.Stat(d)
			if errors.Is(serr, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the sandbox's cgroup %s is still there after a minute (%v)", d, serr)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return res, err, s.usage
}

// forkCode forks children that each fill mb MiB and wait; the parent waits
// for them and returns how they ended.
const forkCode = `
import os, time
def main(children, mb):
    kids = []
    for _ in range(children):
        pid = os.fork()
        if pid == 0:
            b = bytearray(mb << 20)
            time.sleep(2)
            os._exit(0)
        kids.append(pid)
    killed = 0
    for k in kids:
        _, status = os.waitpid(k, 0)
        if os.WIFSIGNALED(status):
            killed += 1
    return {"killed": killed}
`

func TestCgroupLimits(t *testing.T) {
	needCgroups(t)
	const limit = 256 << 20
	p, err := NewPython(Config{Memory: limit, Timeout: 30 * time.Second, Warm: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.probe(); err != nil {
		t.Fatal(err)
	}
	if p.cg == nil {
		t.Fatal("no cgroup although one can be created")
	}

	t.Run("eight children of 200 MB end with the memory error, the sandbox's peak within its limit", func(t *testing.T) {
		_, err, use := runIn(t, p, forkCode, map[string]any{"children": 8, "mb": 200})
		if !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "the limit is 256 MiB") {
			t.Fatalf("got %v", err)
		}
		if use.oomKills == 0 {
			t.Error("the cgroup counted no OOM kill")
		}
		if use.peak <= 0 || use.peak > limit {
			t.Errorf("peak %d bytes, want within (0, %d]", use.peak, limit)
		}
		t.Logf("peak %d MiB, %d OOM kills", use.peak>>20, use.oomKills)
	})

	t.Run("children within the limit together are fine", func(t *testing.T) {
		res, err, use := runIn(t, p, forkCode, map[string]any{"children": 4, "mb": 20})
		if err != nil || res["killed"] != 0.0 {
			t.Fatalf("got %v, %v", res, err)
		}
		if use.oomKills != 0 {
			t.Errorf("%d OOM kills", use.oomKills)
		}
	})

	t.Run("the task limit of the cgroup stops a fork bomb", func(t *testing.T) {
		res, err, use := runIn(t, p, `
import os, time
def main():
    made = 0
    try:
        while made < 10000:
            if os.fork() == 0:
                time.sleep(3)
                os._exit(0)
            made += 1
    except OSError as e:
        return {"made": made, "error": type(e).__name__}
    return {"made": made, "error": ""}
`, nil)
		if err != nil {
			t.Fatal(err)
		}
		made, _ := res["made"].(float64)
		if res["error"] != "BlockingIOError" || made <= 0 || made >= DefaultMaxProcs {
			t.Fatalf("got %v", res)
		}
		if use.pidsRefused == 0 && p.cg.pids != "" {
			t.Error("the cgroup's pids.max refused no fork: another limit stopped the bomb")
		}
	})

	t.Run("300 000 files in /tmp are refused or bounded by the memory limit", func(t *testing.T) {
		res, err, use := runIn(t, p, `
def main(n):
    made = 0
    try:
        for i in range(n):
            open("/tmp/f%d" % i, "w").close()
            made += 1
    except OSError as e:
        return {"made": made, "error": type(e).__name__}
    return {"made": made, "error": ""}
`, map[string]any{"n": 300000})
		switch {
		case errors.Is(err, ErrMemory):
		case err == nil && res["error"] != "":
		default:
			t.Fatalf("got %v, %v: all 300 000 files were made", res, err)
		}
		if use.peak <= 0 || use.peak > limit {
			t.Errorf("peak %d bytes, want within (0, %d]", use.peak, limit)
		}
		t.Logf("%v %v; peak %d MiB", res, err, use.peak>>20)
	})
}

// TestCgroupSweep leaves sandbox cgroups the way a server killed outright
// does, one with a process still in it, and expects the sweep to remove
// them, and to leave the groups of a live server alone.
func TestCgroupSweep(t *testing.T) {
	c := needCgroups(t)
	dead := deadPid(t)
	var leftovers []string
	for i, parent := range c.parents() {
		d := filepath.Join(parent, fmt.Sprintf("%s%d-%d", cgroupPrefix, dead, i+1))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		leftovers = append(leftovers, d)
	}
	t.Cleanup(func() { removeCgroup(time.Now().Add(5*time.Second), leftovers...) })
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { sleeper.Wait(); close(exited) }()
	t.Cleanup(func() { sleeper.Process.Kill(); <-exited })
	for _, d := range leftovers {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), fmt.Sprint(sleeper.Process.Pid)); err != nil {
			t.Fatal(err)
		}
	}
	live, err := c.create(64<<20, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer live.remove()

	swept := sweepCgroups(c)
	for _, d := range leftovers {
		if !slices.Contains(swept, d) {
			t.Errorf("%s was not swept (swept %v)", d, swept)
		}
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there", d)
		}
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("the process in the leftover cgroup still runs")
	}
	for _, d := range live.dirs() {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the live server's cgroup %s was removed: %v", d, err)
		}
	}
}

// TestProxyDirSweep leaves socket directories of network proxies the way a
// killed server does and expects the sweep to remove just those.
func TestProxyDirSweep(t *testing.T) {
	tmp := t.TempDir()
	dead := deadPid(t)
	mk := func(name string) string {
		d := filepath.Join(tmp, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	listen := func(dir string) *net.UnixListener {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "proxy.sock"), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	deadServer := mk(fmt.Sprintf("%s%d-123", proxyDirPrefix, dead))
	liveServer := mk(fmt.Sprintf("%s%d-456", proxyDirPrefix, os.Getpid()))
	// Directories of an older server, without its pid in the name.
	oldClosed := mk(proxyDirPrefix + "789")
	ln := listen(oldClosed)
	ln.SetUnlinkOnClose(false)
	ln.Close()
	oldLive := mk(proxyDirPrefix + "790")
	defer listen(oldLive).Close()
	oldFresh := mk(proxyDirPrefix + "791") // no socket yet
	other := mk("appkb-other-1")

	swept := sweepProxyDirs(tmp)
	for _, d := range []string{deadServer, oldClosed} {
		if !slices.Contains(swept, d) {
			t.Errorf("%s was not swept (swept %v)", d, swept)
		}
	}
	for _, d := range []string{liveServer, oldLive, oldFresh, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}

// deadPid is the pid of a process that has ended.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestCgroupPaths reads the mount table and the process's groups as the
// kernel writes them, for the layouts detectCgroups knows, and maps them
// to the directories the sandbox groups go into.
func TestCgroupPaths(t *testing.T) {
	tests := []struct {
		name      string
		mountinfo string
		cgroup    string
		want      map[string]string // key of the hierarchy -> own directory
	}{
		{
			name: "v1 memory and pids beside an empty v2 tree",
			mountinfo: `35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`,
			cgroup: "8:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n",
			want: map[string]string{
				"memory": "/sys/fs/cgroup/memory/process_api/abc",
				"pids":   "/sys/fs/cgroup/pids",
				"2":      "/sys/fs/cgroup/unified",
			},
		},
		{
			name:      "v2 only, under systemd",
			mountinfo: "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			cgroup:    "0::/system.slice/appkb.service\n",
			want:      map[string]string{"2": "/sys/fs/cgroup/system.slice/appkb.service"},
		},
		{
			name:      "a v2 mount of a subtree, as in a container without a cgroup namespace",
			mountinfo: "50 40 0:26 /docker/x /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n",
			cgroup:    "0::/docker/x/inner\n",
			want:      map[string]string{"2": "/sys/fs/cgroup/inner"},
		},
		{
			name:      "an escaped space in a mount point",
			mountinfo: "60 31 0:40 / /mnt/cg\\040v2 rw - cgroup2 none rw\n",
			cgroup:    "0::/a\n",
			want:      map[string]string{"2": "/mnt/cg v2/a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mounts, err := parseMountinfo(strings.NewReader(tc.mountinfo))
			if err != nil {
				t.Fatal(err)
			}
			own := parseProcCgroup([]byte(tc.cgroup))
			got := map[string]string{}
			for key, m := range mounts {
				if p, ok := own[key]; ok {
					got[key] = m.dir(p)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
