package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// Every serve flag has an environment variable, named in serve --help and
// in the README; the obsolete --strict-providers is in neither.
func TestServeFlagsHaveEnvInHelpAndReadme(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	help, err := runCLI(t, "serve", "--help")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve --help: %v", err)
	}
	fs, _, _, _ := commandFlags(&commands[0], &cmdEnv{})
	if fs.Name() != "appkb serve" {
		t.Fatalf("commands[0] is %s", fs.Name())
	}
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if noEnvFlags[f.Name] {
			return
		}
		e, ok := envOf(f.Name)
		if !ok {
			t.Errorf("--%s has no environment variable in serveEnv", f.Name)
			return
		}
		// The flag's own help paragraph names the variable.
		i := strings.Index(help, "  -"+f.Name+" ")
		if i < 0 {
			i = strings.Index(help, "  -"+f.Name+"\n")
		}
		if i < 0 {
			t.Errorf("serve --help does not list --%s", f.Name)
			return
		}
		para := help[i:]
		if j := strings.Index(para[3:], "\n  -"); j >= 0 {
			para = para[:j+3]
		}
		if !strings.Contains(para, e.env) {
			t.Errorf("serve --help: --%s does not name %s:\n%s", f.Name, e.env, para)
		}
		if !bytes.Contains(readme, []byte("`--"+f.Name+"`")) || !bytes.Contains(readme, []byte(e.env)) {
			t.Errorf("README lacks --%s or %s", f.Name, e.env)
		}
	})
	if n < 20 {
		t.Errorf("only %d serve flags seen", n)
	}
	for _, e := range serveEnv {
		if fs.Lookup(e.flag) == nil {
			t.Errorf("serveEnv names --%s, which serve does not have", e.flag)
		}
	}
	if strings.Contains(help, "strict-providers") {
		t.Error("serve --help still shows the obsolete --strict-providers")
	}
	if strings.Contains(help, "[flags] [flags]") {
		t.Errorf("usage line repeats [flags]:\n%s", help[:strings.Index(help, "\n")])
	}
	// Still accepted, so old scripts keep working.
	if _, err := runCLI(t, "serve", "--strict-providers=false", "--print-config"); err != nil {
		t.Errorf("--strict-providers is refused: %v", err)
	}
}

func TestServeEnvAndPrintConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    []string // lines of --print-config (fields split on spaces)
		absent  []string
		wantErr string
	}{
		{"defaults", nil, nil,
			[]string{"max-inflight 256 (env APPKB_MAX_INFLIGHT)", "queue-wait 5s", "demo false", "addr 127.0.0.1:5001"}, nil, ""},
		{"variables set the limits", map[string]string{"APPKB_MAX_INFLIGHT": "7", "APPKB_QUEUE_WAIT": "3s", "APPKB_READ_TIMEOUT": "9s",
			"APPKB_WRITE_TIMEOUT": "8s", "APPKB_HEADER_TIMEOUT": "2s", "APPKB_IDLE_TIMEOUT": "1m", "APPKB_MAX_CONNS": "40",
			"APPKB_MAX_TEXT": "500", "APPKB_DEMO": "1"}, nil,
			[]string{"max-inflight 7", "queue-wait 3s", "read-timeout 9s", "write-timeout 8s", "header-timeout 2s",
				"idle-timeout 1m0s", "max-conns 40", "max-text 500", "demo true"}, nil, ""},
		{"the command line wins", map[string]string{"APPKB_MAX_INFLIGHT": "7"}, []string{"--max-inflight", "9"},
			[]string{"max-inflight 9"}, nil, ""},
		{"secrets are masked", map[string]string{"APPKB_METRICS_TOKEN": "tok-123",
			"APPKB_DATABASE_URL": "postgres://appkb:hunter2@db:5432/appkb"}, nil,
			[]string{"metrics-token ****", "database-url postgres://appkb:****@db:5432/appkb"}, []string{"tok-123", "hunter2"}, ""},
		{"a bad variable is a usage error", map[string]string{"APPKB_QUEUE_WAIT": "soon"}, nil, nil, nil, "APPKB_QUEUE_WAIT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, e := range serveEnv {
				t.Setenv(e.env, tc.env[e.env])
			}
			out, err := runCLI(t, append(append([]string{"serve", "--data-dir", t.TempDir()}, tc.args...), "--print-config")...)
			if tc.wantErr != "" {
				var ue *usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a usage error naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lines := map[string]bool{}
			for _, l := range strings.Split(out, "\n") {
				f := strings.Fields(l)
				for i := 1; i <= len(f); i++ {
					lines[strings.Join(f[:i], " ")] = true
				}
			}
			for _, w := range tc.want {
				if !lines[w] {
					t.Errorf("--print-config lacks %q:\n%s", w, out)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(out, a) {
					t.Errorf("--print-config shows %q:\n%s", a, out)
				}
			}
		})
	}
}

// Every row of the table with a field is filled from its variable, and the
// flag it defines starts at the row's default; --print-config shows both.
func TestEveryTableRowReadsItsVariable(t *testing.T) {
	sample := func(field any) (string, string) { // value to set, as printed
		switch field.(type) {
		case *string:
			return "v-x", "v-x"
		case *bool:
			return "1", "true"
		case *int:
			return "7", "7"
		case *float64:
			return "2.5", "2.5"
		case *time.Duration:
			return "3s", "3s"
		}
		t.Fatalf("field of type %T", field)
		return "", ""
	}
	for _, row := range serveEnv {
		if row.field == nil || row.flag == "database-url" || row.flag == "data-dir" || row.flag == "log-level" || row.flag == "log-format" {
			continue // the stand-in's rows, and those a value would break
		}
		t.Run(row.flag, func(t *testing.T) {
			for _, e := range serveEnv {
				t.Setenv(e.env, "")
			}
			def, err := runCLI(t, "serve", "--data-dir", t.TempDir(), "--print-config")
			if err != nil {
				t.Fatal(err)
			}
			if got := printed(def, row.flag); got != fmt.Sprint(row.def) && !(row.def == "" && got == "") {
				if d, ok := row.def.(time.Duration); !ok || got != d.String() {
					t.Errorf("default --%s = %q, want %v", row.flag, got, row.def)
				}
			}
			set, want := sample(row.field)
			t.Setenv(row.env, set)
			out, err := runCLI(t, "serve", "--data-dir", t.TempDir(), "--print-config")
			if err != nil {
				t.Fatal(err)
			}
			if row.secret {
				want = "****"
			}
			if got := printed(out, row.flag); got != want {
				t.Errorf("%s=%s: --%s = %q, want %q", row.env, set, row.flag, got, want)
			}
		})
	}
}

// printed is the value --print-config shows for flag name.
func printed(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			if len(f) >= 3 && f[1] != "(env" {
				return f[1]
			}
			return ""
		}
	}
	return "<missing>"
}
