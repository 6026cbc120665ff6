package sandbox

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// DefaultTmpInodes is how many files and directories a sandbox's /tmp may
// hold. bwrap's own --tmpfs takes a size but no inode count, and empty
// files cost no bytes of the size: 300,000 of them held 186–328 MB of
// kernel memory. Each inode costs about a kilobyte, so this bounds /tmp's
// bookkeeping at some 16 MB; python itself writes nothing there (-B).
const DefaultTmpInodes = 16384

// tmpfsPrefix names the mount points of sandbox /tmp filesystems:
// appkb-tmpfs-<server pid>-<n> in the server's temporary directory.
const tmpfsPrefix = "appkb-tmpfs-"

var tmpfsSeq atomic.Int64

// privateTmp is a tmpfs the server mounted for one sandbox's /tmp, with
// both a size and an inode limit; bwrap binds it in place of a tmpfs of
// its own. It takes the right to mount (root on the host), which is also
// what the cgroup limits take; without it mountTmp reports so once and the
// sandboxes keep bwrap's tmpfs, bounded by size and, with a cgroup, by
// the group's memory, which counts the kernel memory of their files.
type privateTmp struct{ dir string }

// tmpfsRefused remembers that mounting failed for want of the right, so
// later sandboxes do not try again.
var tmpfsRefused atomic.Bool

// tmpfsRefusedOnce logs that refusal once per process.
var tmpfsRefusedOnce sync.Once

// mountTmp mounts a fresh tmpfs for one sandbox. It returns nil, nil when
// this process may not mount, and an error only for other failures.
func mountTmp(size int64, inodes int) (*privateTmp, error) {
	if tmpfsRefused.Load() {
		return nil, nil
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-%d", tmpfsPrefix, os.Getpid(), tmpfsSeq.Add(1)))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the python sandbox could not make its /tmp: %w", err)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", size, inodes)
	err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
	if err != nil {
		os.Remove(dir)
		if err == unix.EPERM || err == unix.EACCES {
			tmpfsRefused.Store(true)
			tmpfsRefusedOnce.Do(func() {
				slog.Info("python sandbox: /tmp has a size limit but no file-count limit (mounting a tmpfs takes root)", "err", err)
			})
			return nil, nil
		}
		return nil, fmt.Errorf("the python sandbox could not mount its /tmp: %w", err)
	}
	return &privateTmp{dir: dir}, nil
}

// remove unmounts the filesystem, dropping whatever the sandbox wrote,
// and removes its mount point. A nil *privateTmp does nothing.
func (t *privateTmp) remove() {
	if t == nil {
		return
	}
	if err := unmountTmp(t.dir); err != nil {
		slog.Warn("python sandbox: could not remove its /tmp", "dir", t.dir, "err", err)
	}
}

func unmountTmp(dir string) error {
	// Detached: a process of the sandbox that is still dying may hold it.
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && err != unix.EINVAL {
		return err
	}
	return os.Remove(dir)
}

// withPrivateTmp rewrites bwrap's arguments so that the sandbox's /tmp is
// the mounted dir instead of a tmpfs of bwrap's ("--size N --tmpfs /tmp").
func withPrivateTmp(args []string, dir string) []string {
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--size" && i+3 < len(args) && args[i+2] == "--tmpfs" && args[i+3] == "/tmp":
			out = append(out, "--bind", dir, "/tmp")
			i += 3
		case args[i] == "--tmpfs" && i+1 < len(args) && args[i+1] == "/tmp":
			out = append(out, "--bind", dir, "/tmp")
			i++
		default:
			out = append(out, args[i])
		}
	}
	return out
}

// sweepTmpMounts unmounts and removes the sandbox /tmp filesystems that a
// server killed outright left in tmp, and returns them. Those of a live
// server stay.
func sweepTmpMounts(tmp string) []string {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil
	}
	var swept []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tmpfsPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || serverAlive(pid) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		if unmountTmp(dir) == nil {
			swept = append(swept, dir)
		}
	}
	return swept
}
