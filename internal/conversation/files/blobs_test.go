package files

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/platform/blobs"
)

// TestReplicasShareUploads stores an upload through one Store and reads it
// through another on the same database with a data directory of its own,
// as a second replica would. On PostgreSQL the bytes are in the database;
// on SQLite they stay at <data dir>/files/<id>, where backups find them.
func TestReplicasShareUploads(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dirA := f.store.dataDir
	row, err := f.store.Save(ctx, Rules{}, f.appID, f.alice, "notes.txt", "text/plain", strings.NewReader("shared bytes"))
	if err != nil {
		t.Fatal(err)
	}
	onDisk := filepath.Join(dirA, "files", row.ID)
	_, diskErr := os.Stat(onDisk)
	var rows int64
	if err := f.db.Raw(`SELECT COUNT(*) FROM blobs WHERE key = ?`, row.StorageKey).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if !db.IsPostgres(f.db) {
		if diskErr != nil || rows != 0 {
			t.Fatalf("sqlite: file at %s: %v; %d rows in blobs, want the file and no row", onDisk, diskErr, rows)
		}
		return
	}
	if !os.IsNotExist(diskErr) || rows != 1 {
		t.Fatalf("postgres: file at %s: %v; %d rows in blobs, want no file and one row", onDisk, diskErr, rows)
	}
	b := NewStore(f.db, t.TempDir())
	tests := []struct {
		name string
		read func() (string, error)
	}{
		{"OpenForApp", func() (string, error) {
			_, c, err := b.OpenForApp(ctx, f.appID, "alice", row.ID)
			if err != nil {
				return "", err
			}
			defer c.Close()
			data, err := io.ReadAll(c)
			if int64(len(data)) != c.Size {
				t.Errorf("size %d, read %d bytes", c.Size, len(data))
			}
			return string(data), err
		}},
		{"ReadAll", func() (string, error) {
			got, err := b.Get(ctx, row.ID)
			if err != nil {
				return "", err
			}
			data, err := b.ReadAll(ctx, got)
			return string(data), err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.read()
			if err != nil || got != "shared bytes" {
				t.Fatalf("replica B read %q, %v", got, err)
			}
		})
	}
}

// TestFailedCommitLeavesNoBytes: when the row cannot be written, the bytes
// already put in the blob store are removed again, and nothing stays staged.
func TestFailedCommitLeavesNoBytes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st, err := f.store.Stage(Rules{}, "a.txt", "text/plain", strings.NewReader("orphan?"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, "no-such-app", ""); err == nil {
		t.Fatal("commit for an unknown app: want an error")
	}
	if _, err := f.store.blobs.Stat(ctx, "files/"+st.ID); !errors.Is(err, blobs.ErrNotFound) {
		t.Fatalf("bytes of the failed commit: stat err = %v, want not found", err)
	}
	entries, _ := os.ReadDir(filepath.Join(f.store.dataDir, dirName))
	for _, e := range entries {
		t.Errorf("%s left in the staging directory", e.Name())
	}
	if _, err := st.Commit(ctx, f.appID, f.alice); err == nil {
		t.Fatal("a second commit of the same upload: want an error")
	}
}
