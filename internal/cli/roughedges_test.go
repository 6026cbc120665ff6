package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"appkb/internal/cli/demo"
)

func TestCommandLineRoughEdges(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantHelp  bool   // flag.ErrHelp (exit 0), else a usage error (exit 2)
		want      string // in the output (help) or the usage text (error)
		mustNot   string
		wantError string
	}{
		{name: "no arguments", args: nil, want: "appkb serve", wantError: "no command given"},
		{name: "kb pipeline --help", args: []string{"kb", "pipeline", "--help"}, wantHelp: true, want: "appkb kb pipeline import", mustNot: "kb ingest"},
		{name: "kb pipeline alone", args: []string{"kb", "pipeline"}, want: "appkb kb pipeline import", wantError: "kb pipeline needs a command"},
		{name: "kb pipeline unknown", args: []string{"kb", "pipeline", "export"}, want: "appkb kb pipeline import", wantError: `unknown command "kb pipeline export"`},
		{name: "kb --help", args: []string{"kb", "--help"}, wantHelp: true, want: "appkb kb ingest"},
		{name: "serve usage line", args: []string{"serve", "--help"}, wantHelp: true, want: "Usage: appkb serve [flags]\n", mustNot: "[flags] [flags]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(t, tc.args...)
			if tc.wantHelp {
				if !errors.Is(err, flag.ErrHelp) {
					t.Fatalf("err = %v, want help (exit 0)", err)
				}
			} else {
				var ue *usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("err = %v, want a usage error %q (exit 2)", err, tc.wantError)
				}
				var b bytes.Buffer
				ue.printUsage(&b)
				out = b.String()
			}
			if !strings.Contains(out, tc.want) || (tc.mustNot != "" && strings.Contains(out, tc.mustNot)) {
				t.Errorf("output should have %q and not %q:\n%s", tc.want, tc.mustNot, out)
			}
		})
	}
}

// app import warns at once about a provider the providers file lacks, and
// creates a missing data directory.
func TestImportWarnsOfUnconfiguredProvider(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("APPKB_PROVIDERS", "")
	dir := t.TempDir()
	openai := filepath.Join(dir, "openai.yml")
	os.WriteFile(openai, bytes.Replace(demo.ChatApp, []byte("provider: appkb"), []byte("provider: langgenius/openai/openai"), 1), 0o644)
	builtin := filepath.Join(dir, "builtin.yml")
	os.WriteFile(builtin, demo.ChatApp, 0o644)
	tests := []struct {
		name, file, fallback string
		want                 string // "" for no warning
	}{
		{"unconfigured provider", openai, "", "serve answers its requests with provider_not_initialize"},
		{"unconfigured, with the fallback", openai, "1", "the built-in offline model will answer in its place"},
		{"the built-in provider", builtin, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("APPKB_FALLBACK_BUILTIN", tc.fallback)
			dataDir := filepath.Join(t.TempDir(), "not-yet")
			var logs, out bytes.Buffer
			err := run(context.Background(), []string{"app", "import", "--data-dir", dataDir, tc.file}, &out, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), `"api_key":"app-`) {
				t.Errorf("import printed %q", out.String())
			}
			got := logs.String()
			if tc.want == "" {
				if strings.Contains(got, "not configured") {
					t.Errorf("warned about a configured provider:\n%s", got)
				}
				return
			}
			if !strings.Contains(got, "level=WARN") || !strings.Contains(got, tc.want) || !strings.Contains(got, "providers=openai") {
				t.Errorf("warning missing or unclear:\n%s", got)
			}
		})
	}
}

// The example pipeline the README points at imports with every node
// supported.
func TestExamplePipelineImports(t *testing.T) {
	dataDir := t.TempDir()
	ds := makeDataset(t, dataDir, "pipeline example")
	out, err := runCLI(t, "kb", "pipeline", "import", "--data-dir", dataDir, "--dataset", ds, "../../testdata/pipelines/file-to-chunks.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `imported pipeline "file to chunks"`) || strings.Contains(out, "warning") {
		t.Errorf("kb pipeline import said:\n%s", out)
	}
}
