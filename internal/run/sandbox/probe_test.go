package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewPythonDefersTheProbe checks that building the sandbox runs no
// process (a server's start must not wait for bwrap), and that the check
// it leaves out still happens before any code would run: a bwrap that
// cannot run fails the first run, for each run after it too, and is
// executed only once.
func TestNewPythonDefersTheProbe(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	fake := filepath.Join(dir, "bwrap")
	script := "#!/bin/sh\necho x >> " + marker + "\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		start bool // Start probes in the background
	}{
		{"first run probes", false},
		{"Start probes", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(marker)
			p, err := NewPython(Config{Bwrap: fake, Warm: -1})
			if err != nil {
				t.Fatalf("NewPython: %v", err)
			}
			if _, err := os.Stat(marker); !os.IsNotExist(err) {
				t.Fatalf("NewPython executed bwrap (marker: %v)", err)
			}
			if tc.start {
				p.Start(context.Background())
				defer p.Stop()
			}
			for i := range 2 {
				_, err := p.Run(context.Background(), "def main():\n    return {}\n", nil)
				if err == nil || !strings.Contains(err.Error(), "does not run") {
					t.Fatalf("run %d with a bwrap that cannot run: %v", i, err)
				}
			}
			ran, err := os.ReadFile(marker)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(ran), "x"); n != 1 {
				t.Fatalf("bwrap executed %d times, want once", n)
			}
		})
	}
}
