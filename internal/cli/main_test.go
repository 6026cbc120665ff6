package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
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

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
	"appkb/internal/knowledge/datasets"
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
	brokenFlow := filepath.Join(dir, "broken-flow.yml")
	os.WriteFile(brokenFlow, []byte(`app: {mode: workflow, name: Broken flow}
kind: app
version: 0.3.0
workflow:
  graph:
    nodes:
      - id: start
        data: {type: start, title: Start, variables: [{variable: q, label: q, type: text-input}]}
      - id: cond
        data: {type: if-else, title: Pick one, cases: [{case_id: 'true', logical_operator: and, conditions: [
          {variable_selector: [start, q], comparison_operator: 'sounds like', value: x}]}]}
    edges:
      - {source: start, target: cond}
`), 0o644)
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
		{"import of a workflow whose node can never run fails naming the node", []string{"app", "import", "--data-dir", dataDir, brokenFlow}, "", "Pick one"},
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
	ds, err := datasets.NewStore(gdb, nil).CreateDataset(context.Background(), datasets.Actor{KeyID: "test"}, datasets.CreateParams{Name: name})
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
		{"group without a command", []string{"key"}, "appkb key revoke"},
		{"unknown command in a group", []string{"key", "rotate"}, "appkb key list"},
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
		{[]string{"key", "--help"}, "appkb key create", "appkb app list"},
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

// liveServer runs `appkb serve` in the background until the test ends.
type liveServer struct {
	base string
	out  *syncBuffer
	log  *syncBuffer
	stop func()
}

func startServe(t *testing.T, args ...string) *liveServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	s := &liveServer{base: "http://" + addr, out: &syncBuffer{}, log: &syncBuffer{}}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", addr}, args...), s.out, slog.New(slog.NewTextHandler(s.log, nil)))
	}()
	var stopped bool
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(s.stop)
	for range 200 {
		res, err := http.Get(s.base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return s
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v\n%s", err, s.log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("server never became ready:\n%s", s.log.String())
	return nil
}

func (s *liveServer) call(t *testing.T, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v map[string]any
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return res.StatusCode, v
}

// demoKey picks a key out of the demo banner.
func demoKey(t *testing.T, banner, label string) string {
	t.Helper()
	for _, line := range strings.Split(banner, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), label) {
			f := strings.Fields(line)
			return f[len(f)-1]
		}
	}
	t.Fatalf("no %q in the demo banner:\n%s", label, banner)
	return ""
}

func TestIngestBackupRestoreOfALiveServer(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := startServe(t, "--demo", "--data-dir", dataDir)
	knowledgeKey := demoKey(t, srv.out.String(), "knowledge key")
	appKey := demoKey(t, srv.out.String(), "chat app key")
	status, ds := srv.call(t, "POST", "/v1/datasets", knowledgeKey, `{"name":"handbook"}`)
	if status != 200 {
		t.Fatalf("create dataset: %d %v", status, ds)
	}
	datasetID := ds["id"].(string)

	// Two good files (one in a subdirectory), one of a type that cannot be
	// read, one hidden file that is skipped.
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "leave.txt"), []byte("Staff get twenty-five days of paid leave a year.\n\nLeave requests go to the team lead."), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "travel.md"), []byte("# Travel\n\nTrain journeys under six hours are booked in second class."), 0o644)
	os.WriteFile(filepath.Join(src, "tool.exe"), []byte{0x4d, 0x5a, 0, 1, 2}, 0o644)
	os.WriteFile(filepath.Join(src, ".notes.txt"), []byte("private"), 0o644)

	out, err := runCLI(t, "kb", "ingest", "--data-dir", dataDir, "--dataset", datasetID, src)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 files failed") || !strings.Contains(err.Error(), "tool.exe") {
		t.Fatalf("kb ingest with a bad file: err = %v\n%s", err, out)
	}
	for _, want := range []string{"uploaded " + filepath.Join(src, "leave.txt"), "indexed " + filepath.Join(src, "sub", "travel.md"), "failed " + filepath.Join(src, "tool.exe"), "3 files: 2 indexed"} {
		if !strings.Contains(out, want) {
			t.Errorf("ingest output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, ".notes.txt") || strings.Contains(out, "\r") {
		t.Errorf("hidden file ingested or progress bar drawn without a terminal:\n%s", out)
	}
	if _, err := runCLI(t, "kb", "ingest", "--data-dir", dataDir, "--dataset", "nope", src); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("ingest into an unknown dataset: %v", err)
	}

	// A knowledge pipeline export becomes the knowledge base's pipeline.
	pipe := filepath.Join(t.TempDir(), "pipe.yml")
	os.WriteFile(pipe, []byte("kind: rag_pipeline\nrag_pipeline: {name: plain}\nworkflow:\n  graph:\n    nodes:\n"+
		"    - {id: src, data: {type: datasource, title: File, provider_type: local_file}}\n"+
		"    - {id: odd, data: {type: odd-node, title: Odd}}\n"+
		"    - {id: idx, data: {type: knowledge-index, title: Index}}\n"+
		"    edges:\n    - {source: src, target: odd}\n    - {source: odd, target: idx}\n"), 0o644)
	out, err = runCLI(t, "kb", "pipeline", "import", "--data-dir", dataDir, "--dataset", datasetID, pipe)
	if err != nil || !strings.Contains(out, `imported pipeline "plain"`) || !strings.Contains(out, "odd (odd-node)") {
		t.Errorf("kb pipeline import: err = %v\n%s", err, out)
	}
	if _, err := runCLI(t, "kb", "pipeline", "import", "--data-dir", dataDir, "--dataset", datasetID, filepath.Join(src, "leave.txt")); err == nil {
		t.Error("kb pipeline import accepted a file that is no pipeline")
	}

	// Back up while the server runs, then stop it and restore elsewhere.
	archive := filepath.Join(t.TempDir(), "appkb-backup.tar.gz")
	if out, err := runCLI(t, "backup", "--data-dir", dataDir, archive); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal([]byte(out), &struct {
		Backup *string `json:"backup"`
	}{}); err != nil || !strings.Contains(out, `"backup":"`+archive+`"`) || !strings.Contains(out, `"files":`) {
		t.Errorf("backup printed %q, want its summary as JSON like restore's", out)
	}
	srv.stop()
	if _, err := runCLI(t, "restore", "--data-dir", dataDir, archive); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("restore over a live data dir: %v", err)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if out, err := runCLI(t, "restore", "--data-dir", restored, archive); err != nil || !strings.Contains(out, `"restored"`) {
		t.Fatalf("restore: %v %s", err, out)
	}

	again := startServe(t, "--data-dir", restored)
	status, docs := again.call(t, "GET", "/v1/datasets/"+datasetID+"/documents", knowledgeKey, "")
	if status != 200 {
		t.Fatalf("documents after restore: %d %v", status, docs)
	}
	names := map[string]string{}
	for _, d := range docs["data"].([]any) {
		doc := d.(map[string]any)
		names[doc["name"].(string)] = doc["indexing_status"].(string)
	}
	if len(names) != 2 || names["leave.txt"] != "completed" || names["travel.md"] != "completed" {
		t.Errorf("restored documents: %v", names)
	}
	status, hits := again.call(t, "POST", "/v1/datasets/"+datasetID+"/retrieve", knowledgeKey, `{"query":"how many days of paid leave"}`)
	if status != 200 || !strings.Contains(fmt.Sprint(hits["records"]), "twenty-five") {
		t.Errorf("retrieval after restore: %d %v", status, hits)
	}
	if status, _ := again.call(t, "GET", "/v1/info", appKey, ""); status != 200 {
		t.Errorf("app key after restore: %d", status)
	}
}

func TestMissingProviderFailsUnlessFallback(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("APPKB_FALLBACK_BUILTIN", "")
	dataDir := t.TempDir()
	appFile := filepath.Join(t.TempDir(), "openai.yml")
	os.WriteFile(appFile, bytes.Replace(demo.ChatApp, []byte("provider: appkb"), []byte("provider: langgenius/openai/openai"), 1), 0o644)
	out, err := runCLI(t, "app", "import", "--data-dir", dataDir, appFile)
	if err != nil {
		t.Fatal(err)
	}
	var imported struct {
		AppID  string `json:"app_id"`
		APIKey string `json:"api_key"`
	}
	json.Unmarshal([]byte(out), &imported)

	tests := []struct {
		name       string
		args       []string
		wantStatus int
		wantLog    string
	}{
		{"refused by default", nil, 400, "its requests fail with provider_not_initialize"},
		{"built-in model on request", []string{"--fallback-builtin"}, 200, "the built-in offline model answers in its place"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServe(t, append([]string{"--data-dir", dataDir}, tc.args...)...)
			status, body := srv.call(t, "POST", "/v1/chat-messages", imported.APIKey, `{"query":"hi","inputs":{},"user":"u1"}`)
			if status != tc.wantStatus {
				t.Fatalf("chat: %d %v", status, body)
			}
			if status == 400 && (body["code"] != "provider_not_initialize" || !strings.Contains(fmt.Sprint(body["message"]), "openai")) {
				t.Errorf("error body %v does not name the provider", body)
			}
			logText := srv.log.String()
			if n := strings.Count(logText, "app uses a model provider that is not configured"); n != 1 {
				t.Errorf("%d start-up warnings, want one:\n%s", n, logText)
			}
			if !strings.Contains(logText, tc.wantLog) || !strings.Contains(logText, "app_id="+imported.AppID) || !strings.Contains(logText, "providers=openai") {
				t.Errorf("warning does not say what happens:\n%s", logText)
			}
		})
	}
}

// Commands choose the database from --database-url (or the variable):
// other schemes are refused, and the SQLite-only backup refuses to run
// when the installation is on PostgreSQL.
func TestDatabaseURLChoices(t *testing.T) {
	dataDir := t.TempDir()
	tests := []struct {
		name, env string
		args      []string
		wantErr   string
	}{
		{"unsupported scheme", "", []string{"app", "list", "--data-dir", dataDir, "--database-url", "mysql://root:hunter2@db/appkb"}, "only postgres://"},
		{"backup of a postgres installation", "postgres://appkb@127.0.0.1:1/appkb", []string{"backup", "--data-dir", dataDir, filepath.Join(dataDir, "b.tar.gz")}, "pg_dump"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("APPKB_DATABASE_URL", tc.env)
			_, err := runCLI(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
	t.Run("postgres", func(t *testing.T) {
		url := db.TempURL(t)
		t.Setenv("APPKB_DATABASE_URL", "")
		out, err := runCLI(t, "key", "create", "--knowledge", "--data-dir", t.TempDir(), "--database-url", url)
		if err != nil || !strings.Contains(out, `"api_key":"dataset-`) {
			t.Fatalf("key create on postgres: %q, %v", out, err)
		}
		out, err = runCLI(t, "key", "list", "--data-dir", t.TempDir(), "--database-url", url)
		if err != nil || strings.Count(out, "\n") != 1 {
			t.Fatalf("key list on postgres (another data dir): %q, %v", out, err)
		}
	})
}
