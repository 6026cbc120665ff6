package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink is a Markdown link or image whose target is a relative path
// (optionally with a #fragment); addresses with a scheme are left out.
var mdLink = regexp.MustCompile(`\]\(([^)\s#:]+)(#[^)\s]*)?\)`)

// TestMarkdownLinks checks that every relative link in the project's
// Markdown files names a file or directory that exists, so that moving a
// package does not leave the docs pointing at its old place.
func TestMarkdownLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < 3 {
		t.Fatalf("found only %d Markdown files under %s", len(files), root)
	}
	checked := 0
	for _, f := range files {
		if strings.Contains(f, "node_modules/") || strings.HasPrefix(f, "clients/") {
			continue
		}
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := filepath.Join(root, filepath.Dir(f), m[1])
			checked++
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, m[1])
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the pattern is broken")
	}
	t.Logf("%d relative links in %d files", checked, len(files))
}
