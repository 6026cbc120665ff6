package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pythonFlow is a workflow whose one code node runs python3.
const pythonFlow = `app: {mode: workflow, name: Python flow}
kind: app
version: 0.3.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: n, label: N, type: number, required: true}]}
    - id: double
      data: {type: code, title: Double, code_language: python3,
        code: "def main(n):\n    return {'twice': n * 2}\n",
        variables: [{variable: n, value_selector: [start, n]}],
        outputs: {twice: {type: number}}}
    - id: end
      data: {type: end, title: End, outputs: [{variable: twice, value_selector: [double, twice]}]}
    edges:
    - {source: start, sourceHandle: source, target: double}
    - {source: double, sourceHandle: source, target: end}
`

// bwrapChildren counts the bwrap processes this test process started.
func bwrapChildren(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	me := strconv.Itoa(os.Getpid())
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces, so split after it.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.HasSuffix(s[:i], "(bwrap") {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == me {
			n++
		}
	}
	return n
}

// TestServeKeepsPythonSandboxesReady runs serve with two sandboxes started
// ahead: a workflow's python3 code node runs, the pool keeps its sandboxes
// while serving, and none is left once serve has stopped.
func TestServeKeepsPythonSandboxesReady(t *testing.T) {
	// Without bubblewrap there is no python3 sandbox to keep ready; .ci/run
	// installs it.
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap (bwrap) is not installed")
	}
	dataDir := t.TempDir()
	appFile := filepath.Join(t.TempDir(), "flow.yml")
	if err := os.WriteFile(appFile, []byte(pythonFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "app", "import", "--data-dir", dataDir, appFile)
	if err != nil {
		t.Fatal(err)
	}
	var imported struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal([]byte(out), &imported); err != nil || imported.APIKey == "" {
		t.Fatalf("app import printed %q (%v)", out, err)
	}
	if n := bwrapChildren(t); n != 0 {
		t.Fatalf("%d bwrap processes before serve started", n)
	}

	srv := startServe(t, "--data-dir", dataDir, "--code-warm", "2")
	runFlow := func(n int) (float64, error) {
		body := fmt.Sprintf(`{"inputs":{"n":%d},"user":"u","response_mode":"blocking"}`, n)
		req, _ := http.NewRequest(http.MethodPost, srv.base+"/v1/workflows/run", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+imported.APIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var res struct {
			Data struct {
				Status  string
				Error   any
				Outputs map[string]float64
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 || res.Data.Status != "succeeded" {
			return 0, fmt.Errorf("status %d, run %s: %v", resp.StatusCode, res.Data.Status, res.Data.Error)
		}
		return res.Data.Outputs["twice"], nil
	}
	for i := range 3 {
		got, err := runFlow(20 + i)
		if err != nil || got != float64(2*(20+i)) {
			t.Fatalf("run %d: got %v, %v", i, got, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for n := bwrapChildren(t); n < 2; n = bwrapChildren(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sandboxes kept ready while serving, want 2", n)
		}
		time.Sleep(20 * time.Millisecond)
	}

	srv.stop()
	// Sandboxes end with their runs (reaped in the background just after
	// their answer) and with the pool: none is left behind.
	deadline = time.Now().Add(3 * time.Second)
	for n := bwrapChildren(t); n != 0; n = bwrapChildren(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bwrap processes left after serve stopped", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
