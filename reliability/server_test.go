//go:build reliability

// Package reliability holds tests that run the real appkb binary and treat
// it roughly: they kill it with SIGKILL in the middle of work, exhaust its
// connections, overload it and send it big uploads, and check that it keeps
// serving and that nothing it acknowledged is lost or left stuck. They are
// slow; run them with `make reliability`.
package reliability

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds appkb once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "appkb-reliability-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "appkb")
		cmd := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", binPath, ".")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// server is one running appkb process over a data directory.
type server struct {
	t       *testing.T
	cmd     *exec.Cmd
	dataDir string
	addr    string
	base    string
	keys    map[string]string // "chat", "completion", "knowledge"
	log     *bytes.Buffer
	exited  chan struct{}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

var keyLine = regexp.MustCompile(`^\s+(chat app|completion app|knowledge) key\s+(\S+)`)

// start runs `appkb serve --demo` on dataDir and waits until it answers.
func start(t *testing.T, dataDir string, flags ...string) *server {
	t.Helper()
	s := &server{t: t, dataDir: dataDir, addr: freeAddr(t), keys: map[string]string{}, log: &bytes.Buffer{}, exited: make(chan struct{})}
	s.base = "http://" + s.addr + "/v1"
	args := append([]string{"serve", "--demo", "--data-dir", dataDir, "--addr", s.addr}, flags...)
	s.cmd = exec.Command(binary(t), args...)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = &syncWriter{w: s.log}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { s.kill() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := keyLine.FindStringSubmatch(sc.Text()); m != nil {
			s.keys[strings.Fields(m[1])[0]] = m[2]
		}
		if len(s.keys) == 3 {
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(s.base + "/info")
		if err == nil {
			res.Body.Close()
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server did not start; log:\n%s", s.log)
	return nil
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// kill ends the process with SIGKILL, as a crash or the OOM killer would.
func (s *server) kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
	}
}

// stop ends the process in order (SIGTERM).
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.kill()
	}
}

func (s *server) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// rss reads a field of /proc/PID/status in bytes ("VmRSS", "VmHWM").
func (s *server) rss(field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func (s *server) openFiles() int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid))
	return len(ents)
}

// call sends a JSON request and decodes a JSON answer into out (if not nil).
func (s *server) call(method, path, key string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, fmt.Errorf("%d %s: %v", res.StatusCode, b, err)
		}
	}
	return res.StatusCode, nil
}

// importApp imports a DSL file into dataDir (with no server running) and
// returns its key.
func importApp(t *testing.T, dataDir, dsl string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.yml")
	if err := os.WriteFile(path, []byte(dsl), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary(t), "app", "import", "--data-dir", dataDir, path).CombinedOutput()
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	var r struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\n')+1:]), &r); err != nil || r.APIKey == "" {
		t.Fatalf("import output %s: %v", out, err)
	}
	return r.APIKey
}
