package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An ephemeral, seeded server with a scenario: the keys file lists what the
// seed made, the scripted answer comes back, the admin API answers its
// token, and the data directory is gone once the server stops.
func TestEphemeralSeededServer(t *testing.T) {
	seed := t.TempDir()
	chat, err := os.ReadFile("../../testdata/apps/chat.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seed, "travel.yml"), chat, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(seed, "handbook"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seed, "handbook", "bikes.md"), []byte("# Bicycles\n\nBicycles may be parked in the courtyard racks.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(t.TempDir(), "scenario.yml")
	if err := os.WriteFile(scenario, []byte("rules:\n  - query: weather\n    answer: Scripted sunshine.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	keysOut := filepath.Join(t.TempDir(), "keys.json")

	srv := startServe(t, "--ephemeral", "--seed", seed, "--scenario", scenario, "--keys-out", keysOut,
		"--admin-token", "s3cret", "--faults", "--fallback-builtin", "--code-warm", "0")
	raw, err := os.ReadFile(keysOut)
	if err != nil {
		t.Fatalf("no keys file once ready: %v", err)
	}
	if info, _ := os.Stat(keysOut); info.Mode().Perm() != 0o600 {
		t.Errorf("the keys file is %v, want 0600", info.Mode().Perm())
	}
	var keys struct {
		BaseURL  string `json:"base_url"`
		AdminURL string `json:"admin_url"`
		DataDir  string `json:"data_dir"`
		Apps     map[string]struct {
			AppID  string `json:"app_id"`
			APIKey string `json:"api_key"`
		} `json:"apps"`
		Knowledge map[string]struct {
			DatasetID string `json:"dataset_id"`
			APIKey    string `json:"api_key"`
		} `json:"knowledge"`
	}
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	travel, kb := keys.Apps["travel"], keys.Knowledge["handbook"]
	if keys.BaseURL != srv.base || keys.AdminURL != srv.base+"/admin/v1" || travel.APIKey == "" || kb.APIKey == "" {
		t.Fatalf("keys file: %s", raw)
	}
	if _, err := os.Stat(keys.DataDir); err != nil {
		t.Fatalf("the ephemeral data dir: %v", err)
	}

	code, body := srv.call(t, "POST", "/v1/chat-messages", travel.APIKey,
		`{"query":"how is the weather","user":"u1","inputs":{"traveller":"solo"},"response_mode":"blocking"}`)
	if code != 200 || body["answer"] != "Scripted sunshine." {
		t.Fatalf("scripted answer: %d %v", code, body)
	}
	code, body = srv.call(t, "GET", "/v1/datasets/"+kb.DatasetID+"/documents", kb.APIKey, "")
	if code != 200 || len(body["data"].([]any)) != 1 {
		t.Fatalf("seeded documents: %d %v", code, body)
	}
	code, body = srv.call(t, "GET", "/admin/v1/requests?route=/v1/chat-messages", "s3cret", "")
	if code != 200 || len(body["data"].([]any)) != 1 {
		t.Fatalf("journal: %d %v", code, body)
	}
	if code, _ := srv.call(t, "GET", "/admin/v1/apps", "wrong", ""); code != 401 {
		t.Fatalf("a wrong admin token: %d", code)
	}

	req, _ := http.NewRequest("GET", srv.base+"/v1/info", nil)
	req.Header.Set("Authorization", "Bearer "+travel.APIKey)
	req.Header.Set("X-Appkb-Fault", "status=503")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 503 {
		t.Fatalf("an injected 503: %d", res.StatusCode)
	}

	srv.stop()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(keys.DataDir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ephemeral data dir %s is still there after the server stopped", keys.DataDir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDoubleFlagMistakes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ephemeral", "--database-url", "postgres://x@127.0.0.1/db"}, "--ephemeral"},
		{[]string{"--journal", "-1"}, "--journal"},
		{[]string{"--scenario", filepath.Join(t.TempDir(), "missing.yml")}, "--scenario"},
	} {
		_, err := runCLI(t, append([]string{"serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error about %s", tc.args, err, tc.want)
		}
	}
}
