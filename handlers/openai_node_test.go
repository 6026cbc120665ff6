package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestOfficialNodeClient runs OpenAI's JavaScript SDK (the `openai` npm
// package, clients/openai-node/check.mjs) against appkb: blocking and
// streaming completions, the SDK's stream helper, the model list and an
// unknown model. It is skipped when node or npm is missing; the first run
// installs the package with `npm ci`.
func TestOfficialNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; skipping the OpenAI JavaScript SDK check")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed; skipping the OpenAI JavaScript SDK check")
	}
	dir, err := filepath.Abs("../clients/openai-node")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("npm ci failed (no registry access?); skipping the OpenAI JavaScript SDK check: %v\n%s", err, out)
		}
	}

	m := newRecModel("Hello ", "from ", "appkb.")
	s := newOpenAIServer(t, m)
	srv := httptest.NewServer(s.e)
	defer srv.Close()

	cmd := exec.CommandContext(ctx, node, "check.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "APPKB_BASE_URL="+srv.URL+"/v1", "APPKB_API_KEY="+s.keys[appDemoChat])
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("check.mjs failed: %v\n%s", err, stderr.String())
	}
	var got struct {
		Blocking struct {
			ID, Model, Content, Finish string
			Usage                      map[string]int
		}
		Pieces      []string
		StreamUsage map[string]int
		Helper      struct{ Content, Finish string }
		Models      []string
		Missing     struct {
			Status     int
			Code, Type string
		}
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("output is not JSON: %v: %s", err, stdout)
	}
	wantUsage := map[string]int{"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
	b := got.Blocking
	if b.Content != "Hello from appkb." || b.Finish != "stop" || b.Model != "node-app" || !strings.HasPrefix(b.ID, "chatcmpl-") ||
		!reflect.DeepEqual(b.Usage, wantUsage) {
		t.Errorf("blocking: %+v", b)
	}
	if want := []string{"Hello ", "from ", "appkb."}; !reflect.DeepEqual(got.Pieces, want) {
		t.Errorf("streamed pieces %q, want %q", got.Pieces, want)
	}
	if !reflect.DeepEqual(got.StreamUsage, wantUsage) {
		t.Errorf("stream usage %v", got.StreamUsage)
	}
	if got.Helper.Content != "Hello from appkb." || got.Helper.Finish != "stop" {
		t.Errorf("stream helper: %+v", got.Helper)
	}
	if len(got.Models) != 1 || got.Models[0] != s.appID {
		t.Errorf("models %v, want [%s]", got.Models, s.appID)
	}
	if got.Missing.Status != 404 || got.Missing.Code != "model_not_found" {
		t.Errorf("unknown model: %+v", got.Missing)
	}
	if sent := m.sent(t, "Say hello"); sent.Params["temperature"] != 0.5 || len(sent.Messages) != 4 {
		t.Errorf("the model got %d messages, params %v", len(sent.Messages), sent.Params)
	}
}
