package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/cli/demo"
	"appkb/internal/cli/sqlitecopy"
)

func TestMigrateArguments(t *testing.T) {
	t.Setenv("APPKB_DATABASE_URL", "")
	empty := t.TempDir()
	pgURL := "postgres://appkb@127.0.0.1:1/none?sslmode=disable"
	tests := []struct {
		name    string
		args    []string
		usage   bool   // a usage error (exit status 2)
		wantErr string // text of the error
	}{
		{"no source", []string{"migrate", "--to", pgURL}, true, "--from-sqlite is required"},
		{"no target", []string{"migrate", "--from-sqlite", empty}, true, "--to is required"},
		{"target not PostgreSQL", []string{"migrate", "--from-sqlite", empty, "--to", "mysql://x"}, true, "postgres://"},
		{"bad batch", []string{"migrate", "--from-sqlite", empty, "--to", pgURL, "--batch", "0"}, true, "--batch"},
		{"extra argument", []string{"migrate", "--from-sqlite", empty, "--to", pgURL, "more"}, true, "wrong number of arguments"},
		{"no --data-dir here", []string{"migrate", "--data-dir", empty}, true, "-data-dir"},
		{"source without a database", []string{"migrate", "--from-sqlite", empty, "--to", pgURL}, false, "holds no appkb database"},
		{"missing source", []string{"migrate", "--from-sqlite", filepath.Join(empty, "nope"), "--to", pgURL}, false, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCLI(t, tc.args...)
			var ue *usageError
			if err == nil || errors.As(err, &ue) != tc.usage || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v (usage error: %v), want %q (usage error: %v)", err, errors.As(err, &ue), tc.wantErr, tc.usage)
			}
			if ue != nil {
				var usage bytes.Buffer
				ue.printUsage(&usage)
				if !strings.Contains(usage.String(), "Usage: appkb migrate") {
					t.Errorf("usage text:\n%s", usage.String())
				}
			}
			if _, err := os.Stat(filepath.Join(empty, db.FileName)); err == nil {
				t.Fatal("the command created a database in the source directory")
			}
		})
	}
}

func TestMigrateCommand(t *testing.T) {
	url := db.TempURL(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	appFile := filepath.Join(dir, "app.yml")
	if err := os.WriteFile(appFile, demo.ChatApp, 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(dataDir, 0o755)
	if _, err := runCLI(t, "app", "import", "--data-dir", dataDir, appFile); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "migrate", "--from-sqlite", dataDir, "--to", url)
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	for _, want := range []string{"TABLE", "apps", "files → blobs", "every count matches"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	list, err := runCLI(t, "app", "list", "--database-url", url)
	if err != nil || !strings.Contains(list, "appkb demo chat") {
		t.Fatalf("app list on the copy: %v\n%s", err, list)
	}
	if _, err := runCLI(t, "migrate", "--from-sqlite", dataDir, "--to", url); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("second migrate: err = %v, want a refusal", err)
	}
}

func TestCopyReportAndProgress(t *testing.T) {
	tests := []struct {
		name    string
		tables  []sqlitecopy.Count
		want    []string
		wantErr string
	}{
		{"all equal", []sqlitecopy.Count{{Name: "apps", Source: 2, Target: 2}, {Name: sqlitecopy.FilesStep, Source: 1, Target: 1}},
			[]string{"apps                    2           2\n", "every count matches"}, ""},
		{"a difference fails", []sqlitecopy.Count{{Name: "apps", Source: 2, Target: 2}, {Name: "messages", Source: 5, Target: 4},
			{Name: sqlitecopy.FilesStep, Source: 1, Target: 1}}, []string{"messages                5           4  MISMATCH"}, "count check failed for messages"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := printCopyReport(&out, &sqlitecopy.Report{Tables: tc.tables})
			if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}

	// Without a terminal: one plain line per step, when it ends.
	var log bytes.Buffer
	p := newProgressBar(&log, false)
	p.Begin("apps", 3)
	p.Advance(2)
	p.Advance(3)
	p.End()
	p.Begin("files", 0)
	p.End()
	if got := log.String(); got != "apps                       3/3\nfiles                      0/0\n" {
		t.Errorf("progress without a terminal:\n%s", got)
	}
}
