package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// newPython builds a sandbox with its pool running, or fails the test: a
// machine without bwrap must not pass these tests by skipping them.
func newPython(t testing.TB, cfg Config) *Python {
	t.Helper()
	p, err := NewPython(cfg)
	if err != nil {
		t.Fatalf("NewPython: %v", err)
	}
	// As serve runs it: sandboxes started ahead of their runs.
	p.Start(context.Background())
	t.Cleanup(p.Stop)
	return p
}

func TestRun(t *testing.T) {
	p := newPython(t, Config{})
	tests := []struct {
		name     string
		code     string
		inputs   map[string]any
		want     map[string]any
		wantErr  string // substring of the error
		wantType string // CodeError.Type
		wantLine int    // CodeError.Line
	}{
		{
			name: "inputs come in as keyword arguments and the dict comes back",
			code: `
def main(text, n, price, tags, meta, flag, nothing):
    return {
        "upper": text.upper(),
        "length": len(text),
        "total": n * price,
        "tags": tags + ["ünïcødé"],
        "meta": meta,
        "flag": not flag,
        "nothing": nothing,
        "emoji": "🐍",
        "big": 2**40,
        "nested": {"a": [1, 2.5, {"b": None, "c": [True, False]}]},
    }
`,
			inputs: map[string]any{
				"text": "grüße 世界", "n": 3, "price": 2.5, "tags": []any{"a", "b"},
				"meta": map[string]any{"k": []any{1.0, "v", nil}}, "flag": true, "nothing": nil,
			},
			want: map[string]any{
				"upper": "GRÜSSE 世界", "length": float64(8), "total": 7.5,
				"tags": []any{"a", "b", "ünïcødé"}, "meta": map[string]any{"k": []any{float64(1), "v", nil}},
				"flag": false, "nothing": nil, "emoji": "🐍", "big": float64(1 << 40),
				"nested": map[string]any{"a": []any{float64(1), 2.5, map[string]any{"b": nil, "c": []any{true, false}}}},
			},
		},
		{
			name: "main may take **kwargs and nil inputs mean none",
			code: "def main(**kw):\n    return {'n': len(kw)}\n",
			want: map[string]any{"n": float64(0)},
		},
		{
			name: "print and writes to fd 1 do not disturb the answer",
			code: `
import os, sys
print('{"result": {"forged": true}}')
def main():
    print("hello from main")
    sys.stdout.write("more\n")
    sys.stdout.flush()
    os.write(1, b'{"result": {"forged": true}}\n')
    print("to stderr", file=sys.stderr)
    return {"ok": True}
`,
			want: map[string]any{"ok": true},
		},
		{
			name:   "a module-level import and helper functions work",
			code:   "import json, math\n\ndef helper(x):\n    return math.sqrt(x)\n\ndef main(x):\n    return {'r': helper(x), 'j': json.dumps([1])}\n",
			inputs: map[string]any{"x": 16},
			want:   map[string]any{"r": float64(4), "j": "[1]"},
		},
		{
			name:     "an exception names its type, message and line",
			code:     "def main():\n    x = 1\n    return {'r': x / 0}\n",
			wantErr:  "ZeroDivisionError: division by zero (line 3: return {'r': x / 0})",
			wantType: "ZeroDivisionError", wantLine: 3,
		},
		{
			name:     "an exception raised in a helper points at the innermost line of the code",
			code:     "def helper(v):\n    raise ValueError(f'bad value {v!r}')\n\ndef main(v):\n    return helper(v)\n",
			inputs:   map[string]any{"v": "x"},
			wantErr:  "ValueError: bad value 'x' (line 2",
			wantType: "ValueError", wantLine: 2,
		},
		{
			name:     "an exception at import time",
			code:     "import no_such_module_here\ndef main():\n    return {}\n",
			wantErr:  "ModuleNotFoundError: No module named 'no_such_module_here' (line 1",
			wantType: "ModuleNotFoundError", wantLine: 1,
		},
		{
			name:     "a syntax error names the line",
			code:     "def main():\n    return {'a': 1\n\nx = (\n",
			wantErr:  "SyntaxError:",
			wantType: "SyntaxError",
		},
		{
			name:     "an indentation error is a syntax error too",
			code:     "def main():\nreturn {}\n",
			wantErr:  "IndentationError: expected an indented block",
			wantType: "IndentationError", wantLine: 2,
		},
		{
			name:    "code without main",
			code:    "def mian():\n    return {}\n",
			wantErr: "the code does not define a function main",
		},
		{
			name:     "unknown inputs are a TypeError from the call",
			code:     "def main(a):\n    return {}\n",
			inputs:   map[string]any{"b": 1},
			wantErr:  "TypeError: main() got an unexpected keyword argument 'b'",
			wantType: "TypeError",
		},
		{
			name:    "a list is not a dict",
			code:    "def main():\n    return [1, 2]\n",
			wantErr: "main must return a dict, not list",
		},
		{
			name:    "None is not a dict",
			code:    "def main():\n    pass\n",
			wantErr: "main must return a dict, not None",
		},
		{
			name:    "a set cannot be JSON",
			code:    "def main():\n    return {'s': {1, 2}}\n",
			wantErr: "main returned a value that cannot be turned into JSON: Object of type set is not JSON serializable",
		},
		{
			name:    "NaN cannot be JSON",
			code:    "def main():\n    return {'x': float('nan')}\n",
			wantErr: "cannot be turned into JSON: Out of range float values are not JSON compliant",
		},
		{
			name:     "sys.exit is reported, not a silent success",
			code:     "import sys\ndef main():\n    sys.exit(3)\n",
			wantErr:  "SystemExit: 3 (line 3",
			wantType: "SystemExit",
		},
		{
			name:    "leaving with os._exit gives no result",
			code:    "import os\ndef main():\n    os._exit(0)\n",
			wantErr: "python3 stopped without a result",
		},
		{
			name:    "a process that kills itself is reported as killed",
			code:    "import os, signal\ndef main():\n    os.kill(os.getpid(), signal.SIGKILL)\n",
			wantErr: "python3 was killed (SIGKILL)",
		},
		{
			name:    "a crash names the signal",
			code:    "import os, signal\ndef main():\n    os.kill(os.getpid(), signal.SIGSEGV)\n",
			wantErr: "python3 stopped without a result (killed by signal segmentation fault)",
		},
		{
			name:    "stdin is empty for the code",
			code:    "import sys\ndef main():\n    return {'in': sys.stdin.read()}\n",
			want:    map[string]any{"in": ""},
			wantErr: "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := p.Run(context.Background(), tc.code, tc.inputs)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got  %#v\nwant %#v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; got %v", got)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
			if tc.wantType != "" || tc.wantLine != 0 {
				var ce *CodeError
				if !errors.As(err, &ce) {
					t.Fatalf("error %T is not a *CodeError", err)
				}
				if ce.Type != tc.wantType || (tc.wantLine != 0 && ce.Line != tc.wantLine) {
					t.Fatalf("got type %q line %d, want %q line %d", ce.Type, ce.Line, tc.wantType, tc.wantLine)
				}
			}
		})
	}
}

// limitCase is one case of TestLimits.
type limitCase struct {
	name    string
	cfg     Config
	code    string
	inputs  map[string]any
	want    map[string]any
	wantIs  error
	wantErr string
	maxTime time.Duration // the run must end sooner than this
}

func TestLimits(t *testing.T) {
	tests := []limitCase{
		{
			name:    "a busy loop is stopped at the time limit",
			cfg:     Config{Timeout: 500 * time.Millisecond},
			code:    "def main():\n    while True:\n        pass\n",
			wantIs:  ErrTimeout,
			wantErr: "the code ran longer than 500ms",
			maxTime: 5 * time.Second,
		},
		{
			name:    "sleeping is stopped at the time limit too",
			cfg:     Config{Timeout: 500 * time.Millisecond},
			code:    "import time\ndef main():\n    time.sleep(60)\n    return {}\n",
			wantIs:  ErrTimeout,
			wantErr: "the code ran longer than 500ms",
			maxTime: 5 * time.Second,
		},
		{
			name:    "a process left behind does not hold the run past the limit",
			cfg:     Config{Timeout: 500 * time.Millisecond},
			code:    "import os, time\ndef main():\n    if os.fork() == 0:\n        time.sleep(60)\n    time.sleep(60)\n    return {}\n",
			wantIs:  ErrTimeout,
			maxTime: 5 * time.Second,
		},
		{
			name:    "the CPU-time limit ends code the wall clock has not caught yet",
			code:    "import resource\ndef main():\n    resource.setrlimit(resource.RLIMIT_CPU, (1, 2))\n    while True:\n        pass\n",
			wantIs:  ErrTimeout,
			wantErr: "the code ran longer than 10s (it used up its CPU time)",
			maxTime: 8 * time.Second,
		},
		{
			// Sleeping, not spinning: the busy loop above already shows a
			// loop is stopped; this case is about the default, and 10 s of
			// a spinning core (twice, with and without the cgroup) slowed
			// every other package of make test.
			name:    "the default time limit is 10s",
			code:    "import time\ndef main():\n    time.sleep(60)\n    return {}\n",
			wantIs:  ErrTimeout,
			wantErr: "the code ran longer than 10s",
			maxTime: 20 * time.Second,
		},
		{
			name:    "a huge allocation fails with a memory error",
			code:    "def main():\n    b = bytearray(1 << 40)\n    return {'n': len(b)}\n",
			wantIs:  ErrMemory,
			wantErr: "the code ran out of memory (the limit is 256 MiB)",
		},
		{
			name:    "growing past the memory limit fails",
			cfg:     Config{Memory: 128 << 20},
			code:    "def main():\n    xs = []\n    while True:\n        xs.append(bytearray(8 << 20))\n",
			wantIs:  ErrMemory,
			wantErr: "the limit is 128 MiB",
		},
		{
			name: "memory below the limit is fine",
			code: "def main():\n    return {'n': len(bytearray(64 << 20))}\n",
			want: map[string]any{"n": float64(64 << 20)},
		},
		{
			name:    "a result over the output cap fails",
			code:    "def main():\n    return {'s': 'x' * (2 << 20)}\n",
			wantIs:  ErrOutputTooLarge,
			wantErr: "the result is larger than 1 MiB",
		},
		{
			name:    "a configured output cap applies",
			cfg:     Config{MaxOutput: 1 << 10},
			code:    "def main():\n    return {'s': 'x' * 2000}\n",
			wantIs:  ErrOutputTooLarge,
			wantErr: "the result is larger than 1 KiB",
		},
		{
			name: "a result just under the cap passes",
			cfg:  Config{MaxOutput: 1 << 10},
			code: "def main():\n    return {'s': 'x' * 900}\n",
			want: map[string]any{"s": strings.Repeat("x", 900)},
		},
		{
			name: "the number of processes is limited",
			code: `
import os, time
def main(limit):
    made = 0
    try:
        for _ in range(200):
            if os.fork() == 0:
                time.sleep(5)
                os._exit(0)
            made += 1
    except OSError as e:
        return {"limited": 0 < made < limit, "error": type(e).__name__}
    return {"limited": False, "error": ""}
`,
			inputs: map[string]any{"limit": DefaultMaxProcs},
			want:   map[string]any{"limited": true, "error": "BlockingIOError"},
		},
		{
			name: "files in /tmp are limited in size",
			cfg:  Config{TmpSize: 4 << 20},
			code: `
def main():
    try:
        with open("/tmp/big", "wb") as f:
            for _ in range(8):
                f.write(b"x" * (1 << 20))
                f.flush()
    except OSError as e:
        return {"error": type(e).__name__}
    return {"error": ""}
`,
			want: map[string]any{"error": "OSError"},
		},
	}
	// Every limit holds the same way with the sandbox's cgroup and with
	// rlimits alone (a machine where the server may not create cgroups).
	for _, mode := range []string{"cgroup", "rlimits"} {
		t.Run(mode, func(t *testing.T) {
			// The two modes run side by side, so that their 10 s waits
			// for the default limit overlap.
			t.Parallel()
			if mode == "cgroup" {
				if _, err := detectCgroups(); err != nil {
					t.Skipf("no usable cgroup here: %v", err)
				}
			}
			for _, tc := range tests {
				tc.cfg.noCgroup = mode == "rlimits"
				testLimit(t, tc)
			}
		})
	}
}

func testLimit(t *testing.T, tc limitCase) {
	t.Run(tc.name, func(t *testing.T) {
		t.Parallel()
		p := newPython(t, tc.cfg)
		if err := p.probe(); err != nil {
			t.Fatal(err)
		}
		if (p.cg == nil) != tc.cfg.noCgroup {
			t.Fatalf("cgroup %v with noCgroup %v", p.cg, tc.cfg.noCgroup)
		}
		start := time.Now()
		got, err := p.Run(context.Background(), tc.code, tc.inputs)
		took := time.Since(start)
		if tc.maxTime > 0 && took > tc.maxTime {
			t.Errorf("the run took %s, more than %s", took, tc.maxTime)
		}
		if tc.wantIs == nil {
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			return
		}
		if !errors.Is(err, tc.wantIs) {
			t.Fatalf("error %v (%T) is not %v", err, err, tc.wantIs)
		}
		if !strings.Contains(err.Error(), tc.wantErr) {
			t.Fatalf("error %q does not contain %q", err, tc.wantErr)
		}
	})
}

func TestContext(t *testing.T) {
	p := newPython(t, Config{})
	code := "import time\ndef main():\n    time.sleep(60)\n    return {}\n"

	t.Run("cancelling the context stops the code", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		_, err := p.Run(ctx, code, nil)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "the code was stopped") {
			t.Fatalf("got %v", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("took %s", took)
		}
	})
	t.Run("a context deadline before the time limit is the caller's", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := p.Run(ctx, code, nil)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a context already done runs nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := p.Run(ctx, "def main():\n    return {}\n", nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestIsolation(t *testing.T) {
	p := newPython(t, Config{})
	run := func(t *testing.T, code string, inputs map[string]any) map[string]any {
		t.Helper()
		got, err := p.Run(context.Background(), code, inputs)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		return got
	}

	t.Run("no connection reaches a listener on the host's loopback", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		accepted := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				accepted++
				mu.Unlock()
				c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		_, err = p.Run(context.Background(), `
import socket
def main(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.sendall(b"hello")
    return {"connected": True}
`, map[string]any{"port": port})
		var ce *CodeError
		if !errors.As(err, &ce) || !strings.Contains(ce.Type, "Error") {
			t.Errorf("the connection did not fail with a Python error: %v", err)
		}
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if accepted != 0 {
			t.Fatalf("the listener accepted %d connections", accepted)
		}
	})

	t.Run("there is no network at all", func(t *testing.T) {
		got := run(t, `
import socket
def main():
    out = {}
    for name, addr in [("public", ("1.1.1.1", 53)), ("private", ("10.0.0.1", 80))]:
        try:
            socket.create_connection(addr, timeout=2).close()
            out[name] = "connected"
        except OSError as e:
            out[name] = type(e).__name__
    try:
        socket.getaddrinfo("example.com", 80)
        out["dns"] = "resolved"
    except OSError as e:
        out["dns"] = type(e).__name__
    with open("/proc/net/dev") as f:
        out["interfaces"] = sorted(l.split(":")[0].strip() for l in f.readlines()[2:])
    return out
`, nil)
		for _, k := range []string{"public", "private", "dns"} {
			if v, _ := got[k].(string); v == "connected" || v == "resolved" || v == "" {
				t.Errorf("%s: %v", k, got[k])
			}
		}
		if !reflect.DeepEqual(got["interfaces"], []any{"lo"}) {
			t.Errorf("interfaces: %v", got["interfaces"])
		}
	})

	t.Run("writing outside /tmp fails and leaves nothing behind", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "escaped.txt")
		usr := "/usr/appkb-sandbox-escape-" + fmt.Sprint(time.Now().UnixNano())
		got := run(t, `
def main(targets):
    out = {}
    for t in targets:
        try:
            with open(t, "w") as f:
                f.write("escaped")
            out[t] = "written"
        except OSError as e:
            out[t] = type(e).__name__
    return out
`, map[string]any{"targets": []any{target, usr, "/etc/escaped", "/escaped", "/dev/escaped"}})
		for k, v := range got {
			if v == "written" {
				t.Errorf("%s was written", k)
			}
		}
		if got[usr] != "OSError" { // EROFS
			t.Errorf("/usr: %v", got[usr])
		}
		for _, f := range []string{target, usr, "/etc/escaped", "/escaped", "/dev/escaped"} {
			if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s exists on the host (%v)", f, err)
			}
		}
	})

	t.Run("/tmp is private in both directions", func(t *testing.T) {
		name := fmt.Sprintf("appkb-sandbox-%d", time.Now().UnixNano())
		host, err := os.CreateTemp("", "appkb-sandbox-host-*")
		if err != nil {
			t.Fatal(err)
		}
		host.Close()
		t.Cleanup(func() { os.Remove(host.Name()) })
		got := run(t, `
import os
def main(name, host):
    with open("/tmp/" + name, "w") as f:
        f.write("inside")
    return {"wrote": os.path.exists("/tmp/" + name), "sees_host": os.path.exists(host)}
`, map[string]any{"name": name, "host": host.Name()})
		if got["wrote"] != true || got["sees_host"] != false {
			t.Fatalf("got %v", got)
		}
		if _, err := os.Stat(filepath.Join(os.TempDir(), name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the sandbox's file is on the host: %v", err)
		}
		if _, err := os.Stat(filepath.Join("/tmp", name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the sandbox's file is on the host: %v", err)
		}
	})

	t.Run("the sandbox sees little, holds no privileges and has a clean environment", func(t *testing.T) {
		wd, _ := os.Getwd()
		home, _ := os.UserHomeDir()
		got := run(t, `
import os
def main(paths):
    caps = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs"):
                caps[k] = v.strip()
    return {
        "root": sorted(os.listdir("/")),
        "visible": [p for p in paths if os.path.exists(p)],
        "env": sorted(os.environ),
        "uid": os.getuid(),
        "cwd": os.getcwd(),
        "caps": caps,
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    }
`, map[string]any{"paths": []any{wd, home, "/etc/passwd", "/etc/shadow", "/root", "/home", "/var", "/work", "/srv", "/opt", "/run"}})
		for _, d := range got["root"].([]any) {
			if !slices.Contains([]string{"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr"}, d.(string)) {
				t.Errorf("unexpected top-level entry /%s", d)
			}
		}
		if v := got["visible"].([]any); len(v) != 0 {
			t.Errorf("visible in the sandbox: %v", v)
		}
		for _, k := range got["env"].([]any) {
			if !slices.Contains([]string{"PATH", "HOME", "TMPDIR", "LANG", "PYTHONIOENCODING", "LC_CTYPE", "PWD"}, k.(string)) {
				t.Errorf("unexpected environment variable %s", k)
			}
		}
		if got["uid"] != float64(nobody) || got["cwd"] != "/tmp" {
			t.Errorf("uid %v cwd %v", got["uid"], got["cwd"])
		}
		caps := got["caps"].(map[string]any)
		if caps["CapEff"] != "0000000000000000" || caps["CapPrm"] != "0000000000000000" {
			t.Errorf("capabilities: %v", caps)
		}
		if pids := got["pids"].([]any); len(pids) > 3 {
			t.Errorf("the sandbox sees processes %v", pids)
		}
	})
}

func TestArgs(t *testing.T) {
	p := newPython(t, Config{})
	args := strings.Join(p.Args(), " ")
	for _, flag := range []string{
		"--unshare-user", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--clearenv", "--cap-drop ALL",
		"--ro-bind /usr /usr", "--tmpfs /tmp", "--dev /dev", "--proc /proc", "--remount-ro /dev", "--remount-ro /", "--chdir /tmp",
	} {
		if !strings.Contains(args, flag) {
			t.Errorf("missing %s in %s", flag, args)
		}
	}
	for _, bad := range []string{"--bind ", "--dev-bind", "--ro-bind / /", "--share-net"} {
		if strings.Contains(args, bad) {
			t.Errorf("unexpected %s in %s", bad, args)
		}
	}
}

func TestMissingTools(t *testing.T) {
	t.Run("no bwrap at the configured path", func(t *testing.T) {
		_, err := NewPython(Config{Bwrap: "/nonexistent/bin/bwrap"})
		if !errors.Is(err, ErrNoBubblewrap) {
			t.Fatalf("got %v", err)
		}
		want := "python3 code nodes need bubblewrap (bwrap), which is not installed; install the Debian package bubblewrap"
		if err.Error() != want {
			t.Fatalf("message %q", err)
		}
	})
	t.Run("a path that is not an executable", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "bwrap")
		if err := os.WriteFile(f, []byte("not a program"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := NewPython(Config{Bwrap: f}); !errors.Is(err, ErrNoBubblewrap) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("bwrap removed after construction: Run refuses instead of running unsandboxed", func(t *testing.T) {
		// No pool: a sandbox started ahead would still have the old path.
		p, err := NewPython(Config{})
		if err != nil {
			t.Fatal(err)
		}
		p.bwrap = "/nonexistent/bin/bwrap"
		_, err = p.Run(context.Background(), "def main():\n    return {}\n", nil)
		if !errors.Is(err, ErrNoBubblewrap) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no python3 at the configured path", func(t *testing.T) {
		_, err := NewPython(Config{Python: "/nonexistent/bin/python3"})
		if !errors.Is(err, ErrNoPython) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("an interpreter outside /usr is refused", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "python3")
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := NewPython(Config{Python: f})
		if err == nil || !strings.Contains(err.Error(), "outside /usr") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestConcurrentRuns(t *testing.T) {
	p := newPython(t, Config{})
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := p.Run(context.Background(), "def main(i):\n    return {'i': i * 2}\n", map[string]any{"i": i})
			if err == nil && got["i"] != float64(i*2) {
				err = fmt.Errorf("run %d got %v", i, got)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPythonRun measures one sandboxed run of trivial code: in a
// sandbox started for it (mostly the cost of starting bwrap and python3),
// in one the pool started ahead (the timer stops while the pool gets one
// ready), and back to back with the pool running, where runs that find the
// pool empty start their own.
func BenchmarkPythonRun(b *testing.B) {
	ctx := context.Background()
	code := "def main(x):\n    return {'y': x + 1}\n"
	inputs := map[string]any{"x": 1}
	run := func(b *testing.B, p *Python) {
		if _, err := p.Run(ctx, code, inputs); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("started-for-the-run", func(b *testing.B) {
		p, err := NewPython(Config{})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			run(b, p)
		}
	})
	b.Run("started-ahead", func(b *testing.B) {
		p := newPython(b, Config{})
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			waitWarm(b, p, 1)
			b.StartTimer()
			run(b, p)
		}
	})
	b.Run("back-to-back", func(b *testing.B) {
		p := newPython(b, Config{})
		waitWarm(b, p, DefaultWarm)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			run(b, p)
		}
		b.ReportMetric(float64(p.warmRuns.Load())/float64(b.N), "warm/op")
	})
}
