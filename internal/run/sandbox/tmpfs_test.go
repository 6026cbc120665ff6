package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mountsUnder lists the mount points in /proc/self/mountinfo whose path
// starts with prefix.
func mountsUnder(t *testing.T, prefix string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(unescapeMount(f[4]), prefix) {
			got = append(got, unescapeMount(f[4]))
		}
	}
	return got
}

// TestTmpInodeLimit fills a sandbox's /tmp with empty files, which cost no
// bytes of its size, and expects the inode limit to stop them, and the
// filesystem to be gone once the run is.
func TestTmpInodeLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs with an inode limit takes root; other users get bwrap's tmpfs (size only)")
	}
	const inodes = 2000
	p := newPython(t, Config{TmpInodes: inodes})
	res, err := p.Run(context.Background(), `
def main(n):
    made = 0
    try:
        for i in range(n):
            open("/tmp/f%d" % i, "w").close()
            made += 1
    except OSError as e:
        return {"made": made, "error": e.strerror}
    return {"made": made, "error": ""}
`, map[string]any{"n": 20000})
	if err != nil {
		t.Fatal(err)
	}
	made, _ := res["made"].(float64)
	if res["error"] != "No space left on device" || made <= inodes/2 || made >= inodes {
		t.Fatalf("got %v, want the inode limit (%d) to refuse a file", res, inodes)
	}
	// An answered sandbox is closed in the background; Stop closes the
	// ones the pool still holds.
	p.Stop()
	prefix := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-", tmpfsPrefix, os.Getpid()))
	var mounted, dirs []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mounted = mountsUnder(t, prefix)
		dirs, _ = filepath.Glob(prefix + "*")
		if len(mounted) == 0 && len(dirs) == 0 {
			return
		}
	}
	t.Errorf("30 s after the sandboxes ended: mounted %v, mount points %v", mounted, dirs)
}

func TestWithPrivateTmp(t *testing.T) {
	tests := []struct{ in, want []string }{
		{[]string{"--size", "10", "--tmpfs", "/tmp", "--dev", "/dev", "--size", "10", "--tmpfs", "/dev/shm"},
			[]string{"--bind", "/x", "/tmp", "--dev", "/dev", "--size", "10", "--tmpfs", "/dev/shm"}},
		{[]string{"--tmpfs", "/tmp", "--proc", "/proc"}, []string{"--bind", "/x", "/tmp", "--proc", "/proc"}},
		{[]string{"--tmpfs", "/dev/shm"}, []string{"--tmpfs", "/dev/shm"}},
	}
	for _, tc := range tests {
		if got := withPrivateTmp(tc.in, "/x"); !slices.Equal(got, tc.want) {
			t.Errorf("withPrivateTmp(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestTmpMountSweep leaves a mounted /tmp the way a killed server does and
// expects the sweep to unmount and remove it, and to leave a live
// server's alone.
func TestTmpMountSweep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting takes root")
	}
	tmp := t.TempDir()
	mount := func(name string) string {
		d := filepath.Join(tmp, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", 0, "size=1m,nr_inodes=10"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(d, unix.MNT_DETACH) })
		return d
	}
	dead := mount(fmt.Sprintf("%s%d-1", tmpfsPrefix, deadPid(t)))
	live := mount(fmt.Sprintf("%s%d-2", tmpfsPrefix, os.Getpid()))
	swept := sweepTmpMounts(tmp)
	if !slices.Equal(swept, []string{dead}) {
		t.Errorf("swept %v, want %v", swept, []string{dead})
	}
	if m := mountsUnder(t, dead); len(m) > 0 {
		t.Errorf("still mounted: %v", m)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", dead, err)
	}
	if m := mountsUnder(t, live); len(m) != 1 {
		t.Errorf("the live server's /tmp was touched: mounts %v", m)
	}
}
