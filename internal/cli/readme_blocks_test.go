package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The prepare functions of the README blocks that run commands: each fills
// a scratch directory (readmeScratch) with what the block takes for granted
// and names what stands in for its placeholders.

// readmeImport imports an app into dataDir with the command line and gives
// its id and key.
func readmeImport(t *testing.T, dataDir, file string) (id, key string) {
	t.Helper()
	out, err := runCLI(t, "app", "import", "--data-dir", dataDir, file)
	if err != nil {
		t.Fatalf("app import %s: %v", file, err)
	}
	var v struct {
		AppID  string `json:"app_id"`
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.AppID == "" {
		t.Fatalf("app import printed %q: %v", out, err)
	}
	return v.AppID, v.APIKey
}

func readmeWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readmeRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// prepareCLIBlock: the command list of "Apps and keys". It runs in ./data
// (the default data directory), where an app, two knowledge bases and a key
// already are, so that APP_ID, ID, ID2 and app-AbCd1234 name real things;
// my-app.yml and new.yml are two of testdata's apps, new.yml renamed so
// that the export shows the replacement; ./handbook/ holds two files.
func prepareCLIBlock(t *testing.T, dir string) ([]string, []string) {
	data := filepath.Join(dir, "data")
	chat := readmeRead(t, filepath.Join(dir, "testdata/apps/chat.yml"))
	readmeWrite(t, filepath.Join(dir, "my-app.yml"), readmeRead(t, filepath.Join(dir, "testdata/apps/completion.yml")))
	appID, _ := readmeImport(t, data, filepath.Join(dir, "testdata/apps/chat.yml"))
	renamed := strings.Replace(chat, "\n  name: ", "\n  name: README replaced ", 1)
	if renamed == chat {
		t.Fatal("testdata/apps/chat.yml has no app name to change")
	}
	readmeWrite(t, filepath.Join(dir, "new.yml"), renamed)
	out, err := runCLI(t, "key", "create", "--data-dir", data, "--app", appID)
	if err != nil {
		t.Fatal(err)
	}
	var key struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal([]byte(out), &key); err != nil || len(key.APIKey) < 12 {
		t.Fatalf("key create printed %q: %v", out, err)
	}
	kb1, kb2 := makeDataset(t, data, "Handbook"), makeDataset(t, data, "Policies")
	readmeWrite(t, filepath.Join(dir, "handbook/leave.md"), "# Leave\n\nStaff have twenty-five days of paid leave a year.\n")
	readmeWrite(t, filepath.Join(dir, "handbook/bikes.txt"), "Bicycles may be parked in the courtyard racks.\n")
	addr := freeAddr(t)
	writeReadmeVar(t, dir, "addr", addr)
	return []string{
		"APP_ID", appID,
		"--dataset ID2", "--dataset " + kb2,
		"--dataset ID ", "--dataset " + kb1 + " ",
		"app-AbCd1234", key.APIKey[:12],
		"127.0.0.1:5001", addr,
	}, nil
}

// prepareBackupBlock: the backup and restore of "Backups", with a scratch
// data directory in place of /var/lib/appkb and archives in ./backups; the
// restore takes the archive the backup just wrote, whatever today is.
func prepareBackupBlock(t *testing.T, dir string) ([]string, []string) {
	data := filepath.Join(dir, "data")
	readmeImport(t, data, filepath.Join(dir, "testdata/apps/chat.yml"))
	if err := os.Mkdir(filepath.Join(dir, "backups"), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{
		"/var/lib/appkb-restored", filepath.Join(dir, "restored"),
		"/var/lib/appkb", data,
		"/backups/appkb-2026-11-26.tar.gz", filepath.Join(dir, "backups") + "/appkb-$(date +%F).tar.gz",
		"/backups", filepath.Join(dir, "backups"),
	}, nil
}

// prepareMCPBlock: the MCP agent example of "Agents and tools", run as
// written from a fresh directory: the reference server's package files
// are copied (npm ci installs into the copy, never into the repository's
// clients/ that other tests use), and free ports stand in for 8808 and
// 5001 (APPKB_ADDR moves serve, which the block starts without --addr).
func prepareMCPBlock(t *testing.T, dir string) ([]string, []string) {
	// The block installs the server from the npm registry; a machine that
	// cannot reach it skips, as the MCP tests of internal/run/tools do.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "npm", "ping").CombinedOutput(); err != nil {
		t.Skipf("the npm registry does not answer, so the reference server cannot be installed: %v\n%s", err, out)
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		readmeWrite(t, filepath.Join(dir, "clients/mcp-everything", f), readmeRead(t, filepath.Join("../../clients/mcp-everything", f)))
	}
	mcp, addr := freeAddr(t), freeAddr(t)
	mcpPort := mcp[strings.LastIndex(mcp, ":")+1:]
	return []string{
		"PORT=8808", "PORT=" + mcpPort,
		"127.0.0.1:8808", mcp,
		"127.0.0.1:5001", addr,
	}, []string{"APPKB_ADDR=" + addr}
}

// The block splitter finds each fence, its language and the marker on the
// last non-blank line before it, and nothing else.
func TestReadmeBlocks(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want []readmeBlock
	}{
		{"plain sh", "text\n```sh\necho hi\n```\n", []readmeBlock{{line: 2, lang: "sh", text: "echo hi\n"}}},
		{"marker right before", "<!-- doctest: skip (needs root) -->\n```bash\napt-get install x\n```\n",
			[]readmeBlock{{line: 2, lang: "bash", marker: "skip (needs root)", text: "apt-get install x\n"}}},
		{"marker with blank lines between", "<!--doctest: cli-->\n\n\n```\nout\n```\n",
			[]readmeBlock{{line: 4, marker: "cli", text: "out\n"}}},
		{"marker of an earlier paragraph does not count", "<!-- doctest: cli -->\nSome text.\n```sh\nls\n```\n",
			[]readmeBlock{{line: 3, lang: "sh", text: "ls\n"}}},
		{"a marker belongs to one block", "<!-- doctest: a -->\n```sh\n1\n```\n```sh\n2\n```\n",
			[]readmeBlock{{line: 2, lang: "sh", marker: "a", text: "1\n"}, {line: 5, lang: "sh", text: "2\n"}}},
		{"fence text inside a block", "```sh\ncat <<'X'\n```js\nX\n```\n",
			[]readmeBlock{{line: 1, lang: "sh", text: "cat <<'X'\n```js\nX\n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := readmeBlocks(tc.md)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d blocks %+v, want %+v", len(got), got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("block %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
