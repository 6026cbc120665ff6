package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"appkb/db"
)

func archive(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestRoundTripAndRefusals(t *testing.T) {
	src := t.TempDir()
	gdb, err := db.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(src, "files", "ds"), 0o755)
	os.WriteFile(filepath.Join(src, "files", "ds", "doc.txt"), []byte("hello"), 0o644)
	var good bytes.Buffer
	sum, err := Write(context.Background(), src, &good)
	db.Close(gdb)
	if err != nil || sum.Files != 1 {
		t.Fatalf("Write: %+v %v", sum, err)
	}

	tests := []struct {
		name    string
		data    []byte
		prepare func(dir string)
		wantErr string
	}{
		{"round trip", good.Bytes(), nil, ""},
		{"not empty", good.Bytes(), func(dir string) { os.WriteFile(filepath.Join(dir, "x"), nil, 0o644) }, "not empty"},
		{"path outside the directory", archive(t, map[string]string{"../evil": "x", db.FileName: ""}), nil, "not a plain file"},
		{"no database", archive(t, map[string]string{"files/a.txt": "x"}), nil, "not an appkb backup"},
		{"not a database", archive(t, map[string]string{db.FileName: "garbage garbage garbage"}), nil, "database"},
		{"not gzip", []byte("plain"), nil, "not a gzip archive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "restore")
			if tc.prepare != nil {
				os.MkdirAll(dir, 0o755)
				tc.prepare(dir)
			}
			_, err := Restore(bytes.NewReader(tc.data), dir)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(filepath.Join(dir, "files", "ds", "doc.txt")); err != nil || string(b) != "hello" {
					t.Errorf("restored file: %q %v", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
				t.Error("an entry was written outside the directory")
			}
			if tc.prepare == nil {
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("a failed restore left %d entries behind", len(entries))
				}
			}
		})
	}
}
