package documents_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/blobs"
	"appkb/internal/platform/docparse"
)

// TestReplicasShareDocuments stores a document through a Service with one
// data directory and indexes and serves it through workers and a Service
// with another, as two replicas on one PostgreSQL database would. On
// SQLite the file stays at <data dir>/datasets/<dataset>/<document>, where
// backups find it.
func TestReplicasShareDocuments(t *testing.T) {
	f := newFixture(t, datasets.TechniqueEconomy)
	ctx := context.Background()
	out, err := f.svc.CreateFromFile(ctx, f.actor, f.dataset,
		documents.Upload{Name: "notes.md", MimeType: "text/markdown", Body: strings.NewReader(sample)}, documents.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Document.ID
	onDisk := filepath.Join(f.dataDir, "datasets", f.dataset, id)
	_, diskErr := os.Stat(onDisk)
	rows := f.count(t, `SELECT COUNT(*) FROM blobs`)
	if !db.IsPostgres(f.db) {
		if diskErr != nil || rows != 0 {
			t.Fatalf("sqlite: file at %s: %v; %d rows in blobs, want the file and no row", onDisk, diskErr, rows)
		}
		return
	}
	if !os.IsNotExist(diskErr) || rows != 1 {
		t.Fatalf("postgres: file at %s: %v; %d rows in blobs, want no file and one row", onDisk, diskErr, rows)
	}

	// Replica B: its own empty data directory, its own workers.
	dirB := t.TempDir()
	stop := documents.Start(ctx, documents.Config{DB: f.db, DataDir: dirB, Poll: 10 * time.Millisecond, Logger: quiet})
	t.Cleanup(stop)
	if st := f.wait(t, out.Batch)[0]; st.IndexingStatus != documents.StatusCompleted {
		t.Fatalf("indexed on B: %+v", st)
	}
	if n := f.count(t, `SELECT COUNT(*) FROM segments WHERE document_id = ?`, id); n == 0 {
		t.Fatal("B wrote no chunks")
	}
	svcB := documents.NewService(f.db, nil, dirB)
	tests := []struct {
		name string
		read func() (string, error)
	}{
		{"File", func() (string, error) {
			sf, err := svcB.File(ctx, f.actor, f.dataset, id)
			if err != nil {
				return "", err
			}
			r, _, err := sf.Open(ctx)
			if err != nil {
				return "", err
			}
			defer r.Close()
			b, err := io.ReadAll(r)
			return string(b), err
		}},
		{"archive", func() (string, error) {
			files, err := svcB.Files(ctx, f.actor, f.dataset, []string{id})
			if err != nil {
				return "", err
			}
			r, err := documents.OpenArchive(ctx, files, quiet)
			if err != nil {
				return "", err
			}
			defer r.Close()
			b, err := io.ReadAll(r)
			if !bytes.Contains(b, []byte("notes.md")) {
				return "", errors.New("the archive does not name notes.md")
			}
			return sample, err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.read()
			if err != nil || got != sample {
				t.Fatalf("B read %q, %v", got, err)
			}
		})
	}
	entries, _ := os.ReadDir(dirB)
	for _, e := range entries {
		t.Errorf("B's data directory holds %s", e.Name())
	}
}

// TestDocumentFileLifecycle: a replacement over the size limit keeps the
// old file; deleting a knowledge base removes its files and only its.
func TestDocumentFileLifecycle(t *testing.T) {
	f := newFixture(t, datasets.TechniqueEconomy)
	ctx := context.Background()
	store := blobs.For(f.db, f.dataDir)
	create := func(dataset, text string) string {
		out, err := f.svc.CreateFromText(ctx, f.actor, dataset, "doc", text, documents.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		return "datasets/" + dataset + "/" + out.Document.ID
	}
	content := func(key string) string {
		r, _, err := store.Open(ctx, key)
		if err != nil {
			return "error: " + err.Error()
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		return string(b)
	}
	kept := create(f.dataset, "first text")
	economy := datasets.TechniqueEconomy
	other, err := datasets.NewStore(f.db, nil).CreateDataset(ctx, f.actor, datasets.CreateParams{Name: "other", IndexingTechnique: &economy})
	if err != nil {
		t.Fatal(err)
	}
	otherKey := create(other.ID, "other text")

	steps := []struct {
		name  string
		run   func() error
		code  string
		check map[string]string // key -> content ("" for gone)
	}{
		{"an oversized replacement is refused", func() error {
			big := bytes.Repeat([]byte("x"), int(docparse.DefaultLimits.MaxFileSize)+1)
			docID := kept[strings.LastIndex(kept, "/")+1:]
			_, err := f.svc.UpdateDocument(ctx, f.actor, f.dataset, docID, documents.UpdateParams{
				File: &documents.Upload{Name: "big.txt", Body: bytes.NewReader(big)}})
			return err
		}, apperr.CodeFileTooLarge, map[string]string{kept: "first text"}},
		{"a replacement within the limit is stored", func() error {
			docID := kept[strings.LastIndex(kept, "/")+1:]
			_, err := f.svc.UpdateDocument(ctx, f.actor, f.dataset, docID, documents.UpdateParams{
				File: &documents.Upload{Name: "new.txt", Body: strings.NewReader("second text")}})
			return err
		}, "", map[string]string{kept: "second text"}},
		{"deleting the knowledge base removes its files", func() error {
			return f.svc.DeleteDataset(ctx, f.actor, f.dataset)
		}, "", map[string]string{kept: "", otherKey: "other text"}},
		{"an unknown knowledge base", func() error {
			return f.svc.DeleteDataset(ctx, f.actor, f.dataset)
		}, apperr.CodeNotFound, map[string]string{otherKey: "other text"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := st.run()
			if st.code == "" && err != nil || st.code != "" && !apperr.Is(err, st.code) {
				t.Fatalf("err = %v, want %q", err, st.code)
			}
			for key, want := range st.check {
				if want == "" {
					if _, err := store.Stat(ctx, key); !errors.Is(err, blobs.ErrNotFound) {
						t.Errorf("%s: stat err = %v, want not found", key, err)
					}
					continue
				}
				if got := content(key); got != want {
					t.Errorf("%s holds %q, want %q", key, got, want)
				}
			}
		})
	}
}
