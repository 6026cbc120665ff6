package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"appkb/db"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// A data directory is its owner's alone: the directory 0700, the database
// 0600, when made, after a restore and inside the archive; and an older
// installation's 0644 database is narrowed when it is opened.
func TestPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, db.FileName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	gdb, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec("CREATE TABLE t (x)").Error; err != nil {
		t.Fatal(err)
	}
	db.Close(gdb)
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("data dir %v, want 0700", m)
	}
	for _, f := range []string{db.FileName, db.FileName + "-wal"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			if m := mode(t, filepath.Join(dir, f)); m != 0o600 {
				t.Errorf("%s %v, want 0600", f, m)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "files", "up"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	archivePath := filepath.Join(t.TempDir(), "b.tar.gz")
	if _, err := WriteFile(context.Background(), dir, archivePath); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(archivePath)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Mode != 0o600 {
			t.Errorf("archive entry %s has mode %o, want 600", hdr.Name, hdr.Mode)
		}
	}
	f.Close()

	restored := filepath.Join(t.TempDir(), "restored")
	rf, _ := os.Open(archivePath)
	defer rf.Close()
	if _, err := Restore(rf, restored); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, restored); m != 0o700 {
		t.Errorf("restored dir %v, want 0700", m)
	}
	for _, f := range []string{db.FileName, "files/up"} {
		if m := mode(t, filepath.Join(restored, f)); m != 0o600 {
			t.Errorf("restored %s %v, want 0600", f, m)
		}
	}
}

// What a killed backup left is removed by the next start (data directory)
// or the next backup to the same path; scratch space still being written
// is kept.
func TestLeftoversRemoved(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	stale := filepath.Join(dir, tmpPrefix+"123")
	fresh := filepath.Join(dir, tmpPrefix+"456")
	for _, d := range []string{stale, fresh} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, db.FileName), []byte("copy"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{stale, filepath.Join(stale, db.FileName)} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	partial := filepath.Join(dir, "b.tar.gz.tmp-789")
	if err := os.WriteFile(partial, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(partial, old, old); err != nil {
		t.Fatal(err)
	}
	RemoveLeftovers(dir)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a stale backup copy survived the start: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a backup still being written was removed: %v", err)
	}
	removeStale(dir, "b.tar.gz.tmp-")
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Errorf("a stale partial archive survived the next backup: %v", err)
	}
}
