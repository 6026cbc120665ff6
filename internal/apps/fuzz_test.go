package apps

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"appkb/internal/platform/apperr"
)

// yamlBombs are hostile definitions: alias expansion (billion laughs), deep
// nesting, long keys. Parse must refuse or read each quickly and in bounded
// memory.
func yamlBombs() [][]byte {
	laughs := "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		laughs += n + ": &" + n + " [" + strings.Repeat("*"+prev+",", 8) + "*" + prev + "]\n"
		prev = n
	}
	return [][]byte{
		[]byte(laughs + "app: {mode: chat, name: *i}\n"),
		[]byte("app: " + strings.Repeat("[", 50_000) + strings.Repeat("]", 50_000) + "\n"),
		[]byte("app:\n" + strings.Repeat("  ", 1) + strings.Repeat("- ", 20_000) + "x\n"),
		[]byte("workflow: {graph: {nodes: [" + strings.Repeat("{id: n, data: {type: code}},", 2000) + "]}}\napp: {mode: workflow, name: x}\n"),
	}
}

func TestYAMLBombs(t *testing.T) {
	for i, b := range yamlBombs() {
		if _, err := Parse(b); err != nil {
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != apperr.CodeInvalidParam {
				t.Errorf("bomb %d: %T %v", i, err, err)
			}
		}
	}
}

// FuzzParseHostile checks, starting from the bombs, that any input either
// parses or fails with an invalid_param error, never a panic or another
// kind of error.
func FuzzParseHostile(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/apps/*.yml")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, b := range yamlBombs() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		def, err := Parse(data)
		if err != nil {
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != apperr.CodeInvalidParam || ae.Message == "" {
				t.Fatalf("error %T %v is not an invalid_param with a message", err, err)
			}
			return
		}
		if def == nil || def.App == nil || !isMode(def.App.Mode) {
			t.Fatalf("parsed without an app: %+v", def)
		}
	})
}

func isMode(m string) bool {
	for _, x := range Modes {
		if x == m {
			return true
		}
	}
	return false
}
