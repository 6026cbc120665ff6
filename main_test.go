package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"appkb/apikeys"
	"appkb/apps"
	"appkb/db"
	"appkb/demo"
	"appkb/knowledge"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return out.String(), err
}

func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	appFile := filepath.Join(dir, "app.yml")
	if err := os.WriteFile(appFile, demo.ChatApp, 0o644); err != nil {
		t.Fatal(err)
	}
	badFile := filepath.Join(dir, "bad.yml")
	os.WriteFile(badFile, []byte("app: {name: x, mode: nonsense}\n"), 0o644)
	renamedFile := filepath.Join(dir, "renamed.yml")
	os.WriteFile(renamedFile, bytes.Replace(demo.ChatApp, []byte("name: appkb demo chat"), []byte("name: renamed demo"), 1), 0o644)
	dataDir := filepath.Join(dir, "data")
	if _, err := runCLI(t, "app", "list", "--data-dir", dataDir); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("app list on a missing data dir: %v", err)
	}
	if _, err := os.Stat(dataDir); err == nil {
		t.Fatal("app list created the missing data directory")
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	d1, d2 := makeDataset(t, dataDir, "one"), makeDataset(t, dataDir, "two")

	out, err := runCLI(t, "app", "import", "--data-dir", dataDir, appFile)
	if err != nil {
		t.Fatal(err)
	}
	var imported struct{ AppID, APIKey string }
	if err := json.Unmarshal([]byte(out), &struct {
		AppID  *string `json:"app_id"`
		APIKey *string `json:"api_key"`
	}{&imported.AppID, &imported.APIKey}); err != nil || imported.AppID == "" || !strings.HasPrefix(imported.APIKey, "app-") {
		t.Fatalf("app import printed %q (%v)", out, err)
	}

	tests := []struct {
		name    string
		args    []string
		wantOut string
		wantErr string
	}{
		{"help", []string{"--help"}, "appkb key create", ""},
		{"import of a bad file fails", []string{"app", "import", "--data-dir", dataDir, badFile}, "", "nonsense"},
		{"import needs a file", []string{"app", "import", "--data-dir", dataDir}, "", "wrong number of arguments"},
		{"app list", []string{"app", "list", "--data-dir", dataDir}, imported.AppID, ""},
		{"app key", []string{"key", "create", "--data-dir", dataDir, "--app", imported.AppID}, `"api_key":"app-`, ""},
		{"app key for an unknown app", []string{"key", "create", "--data-dir", dataDir, "--app", "nope"}, "", "does not exist"},
		{"scoped knowledge key", []string{"key", "create", "--data-dir", dataDir, "--knowledge", "--dataset", d1, "--dataset", d2}, `"api_key":"dataset-`, ""},
		{"knowledge key for an unknown dataset", []string{"key", "create", "--data-dir", dataDir, "--knowledge", "--dataset", d1, "--dataset", "nope"}, "", "knowledge base nope does not exist"},
		{"both kinds at once", []string{"key", "create", "--data-dir", dataDir, "--knowledge", "--app", imported.AppID}, "", "exactly one"},
		{"key list", []string{"key", "list", "--data-dir", dataDir}, `"datasets":["` + min(d1, d2) + `","` + max(d1, d2) + `"]`, ""},
		{"version", []string{"version"}, "appkb dev (commit", ""},
		{"--version", []string{"--version"}, "appkb dev (commit", ""},
		{"export round-trips the file", []string{"app", "export", "--data-dir", dataDir, imported.AppID}, string(demo.ChatApp), ""},
		{"replace with another definition keeps the id", []string{"app", "import", "--data-dir", dataDir, "--replace", imported.AppID, renamedFile}, `"app_id":"` + imported.AppID + `"`, ""},
		{"export shows the replacement", []string{"app", "export", "--data-dir", dataDir, imported.AppID}, "renamed demo", ""},
		{"replace with a bad file fails", []string{"app", "import", "--data-dir", dataDir, "--replace", imported.AppID, badFile}, "", "nonsense"},
		{"export after a failed replace is unchanged", []string{"app", "export", "--data-dir", dataDir, imported.AppID}, "renamed demo", ""},
		{"export of an unknown app", []string{"app", "export", "--data-dir", dataDir, "nope"}, "", "does not exist"},
		{"the key survives a replace", []string{"key", "list", "--data-dir", dataDir}, imported.APIKey[:12], ""},
		{"revoke by prefix", []string{"key", "revoke", "--data-dir", dataDir, imported.APIKey[:12]}, `"revoked"`, ""},
		{"serve with a missing providers file", []string{"serve", "--data-dir", dataDir, "--providers", filepath.Join(dir, "none.yaml")}, "", "providers"},
		{"serve with a bad fetch allowlist", []string{"serve", "--data-dir", dataDir, "--fetch-allow", "10.0.0.0/8,nonsense"}, "", "nonsense"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("output %q lacks %q", out, tc.wantOut)
			}
		})
	}

	// The failed import created nothing, and the revoked key no longer works.
	gdb, err := db.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(gdb)
	out, _ = runCLI(t, "app", "list", "--data-dir", dataDir)
	if n := strings.Count(out, "\n"); n != 1 {
		t.Errorf("%d apps after one good and one bad import", n)
	}
	if _, err := apikeys.NewStore(gdb).Authenticate(context.Background(), imported.APIKey); err == nil {
		t.Error("revoked key still authenticates")
	}
}

func TestServeAnswersAndShutsDownCleanly(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out syncBuffer
	go func() {
		done <- run(ctx, []string{"serve", "--demo", "--addr", addr, "--data-dir", t.TempDir()}, &out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()

	var resp *http.Response
	for range 100 {
		if resp, err = http.Get("http://" + addr + "/openapi.yaml"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		cancel()
		t.Fatalf("server never answered: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /openapi.yaml: %d", resp.StatusCode)
	}
	if !strings.Contains(out.String(), "chat app key        app-") {
		t.Errorf("demo keys not printed:\n%s", out.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// syncBuffer is a bytes.Buffer safe to write from the server goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// makeDataset creates a knowledge base in dataDir and returns its id.
func makeDataset(t *testing.T, dataDir, name string) string {
	t.Helper()
	gdb, err := db.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(gdb)
	ds, err := knowledge.NewStore(gdb, nil).CreateDataset(context.Background(), knowledge.Actor{KeyID: "test"}, knowledge.CreateParams{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return ds.ID
}

func TestUsageMistakes(t *testing.T) {
	dataDir := t.TempDir()
	tests := []struct {
		name      string
		args      []string
		wantUsage string // text of the command's own usage
	}{
		{"unknown command", []string{"frobnicate"}, "appkb kb ingest"},
		{"unknown flag", []string{"key", "list", "--data-dir", dataDir, "--bogus"}, "Usage: appkb key list"},
		{"missing argument", []string{"key", "revoke", "--data-dir", dataDir}, "Usage: appkb key revoke"},
		{"extra argument", []string{"app", "list", "--data-dir", dataDir, "x"}, "Usage: appkb app list"},
		{"both key kinds", []string{"key", "create", "--data-dir", dataDir, "--app", "a", "--knowledge"}, "-knowledge"},
		{"ingest without a dataset", []string{"kb", "ingest", "--data-dir", dataDir, dataDir}, "-dataset"},
		{"bad log level", []string{"key", "list", "--data-dir", dataDir, "--log-level", "loud"}, "-log-level"},
		{"bad flag value", []string{"serve", "--rate-limit", "fast"}, "-rate-burst"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCLI(t, tc.args...)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error (exit status 2)", err)
			}
			var usage bytes.Buffer
			ue.printUsage(&usage)
			if !strings.Contains(usage.String(), tc.wantUsage) {
				t.Errorf("usage lacks %q:\n%s", tc.wantUsage, usage.String())
			}
		})
	}
}

func TestPerCommandHelp(t *testing.T) {
	tests := []struct {
		args          []string
		want, mustNot string
	}{
		{[]string{"key", "create", "--help"}, "-label", "appkb app import"},
		{[]string{"serve", "-h"}, "-cors-origins", "key revoke"},
		{[]string{"kb", "ingest", "--help"}, "-indexing-technique", "-cors-origins"},
		{[]string{"help", "backup"}, "Usage: appkb backup", "-addr"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := runCLI(t, tc.args...)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("err = %v, want flag.ErrHelp (exit status 0)", err)
			}
			if !strings.Contains(out, tc.want) || strings.Contains(out, tc.mustNot) {
				t.Errorf("help output should contain %q and not %q:\n%s", tc.want, tc.mustNot, out)
			}
		})
	}
}

func TestServeOnBusyPortKeepsDemoKeys(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dataDir := t.TempDir()
	gdb, err := db.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := demo.Ensure(context.Background(), apps.NewStore(gdb), apikeys.NewStore(gdb))
	db.Close(gdb)
	if err != nil {
		t.Fatal(err)
	}

	_, err = runCLI(t, "serve", "--demo", "--addr", l.Addr().String(), "--data-dir", dataDir)
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("serve on a busy port: %v", err)
	}
	gdb, err = db.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(gdb)
	if _, err := apikeys.NewStore(gdb).Authenticate(context.Background(), keys.AppKey); err != nil {
		t.Errorf("the running server's demo key was revoked by the failed start: %v", err)
	}
}
