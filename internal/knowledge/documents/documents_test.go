package documents_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/textsplit"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/blobs"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type fixture struct {
	db      *gorm.DB
	dataDir string
	svc     *documents.Service
	actor   datasets.Actor
	dataset string
}

func newFixture(t *testing.T, technique string) *fixture {
	t.Helper()
	return fixtureOn(t, db.OpenTemp(t), t.TempDir(), technique)
}

// fixtureOn is a fixture on gdb with files under dir: a new knowledge base
// with the given indexing technique and a Service over it.
func fixtureOn(t *testing.T, gdb *gorm.DB, dir, technique string) *fixture {
	t.Helper()
	actor := datasets.Actor{KeyID: "test"}
	ds, err := datasets.NewStore(gdb, nil).CreateDataset(context.Background(), actor, datasets.CreateParams{Name: "kb", IndexingTechnique: &technique})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{db: gdb, dataDir: dir, svc: documents.NewService(gdb, nil, dir), actor: actor, dataset: ds.ID}
}

func (f *fixture) start(t *testing.T) {
	t.Helper()
	stop := documents.Start(context.Background(), documents.Config{DB: f.db, DataDir: f.dataDir, Poll: 10 * time.Millisecond, Logger: quiet})
	t.Cleanup(stop)
}

// wait polls the batch until every document is completed or failed.
func (f *fixture) wait(t *testing.T, batch string) []documents.IndexingStatus {
	t.Helper()
	for range 500 {
		st, err := f.svc.BatchStatus(context.Background(), f.actor, f.dataset, batch)
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for _, s := range st {
			if s.IndexingStatus != documents.StatusCompleted && s.IndexingStatus != documents.StatusError {
				done = false
			}
		}
		if done {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("indexing did not finish")
	return nil
}

func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.db.Raw(query, args...).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// fullTextMatches counts the chunks whose full-text index entry matches
// word, on either engine.
func (f *fixture) fullTextMatches(t *testing.T, word string) int {
	t.Helper()
	if db.IsPostgres(f.db) {
		return f.count(t, `SELECT COUNT(*) FROM segments WHERE tsv @@ to_tsquery('english', ?)`, word)
	}
	return f.count(t, `SELECT COUNT(*) FROM segments_fts WHERE segments_fts MATCH ?`, word)
}

const sample = "Alpha paragraph one about cats.\nSecond line about dogs.\n\nBeta paragraph about birds and fish.\nAnother line here."

func TestProcessRuleModes(t *testing.T) {
	tests := []struct {
		name         string
		rule         *textsplit.ProcessRule
		docForm      string
		wantSegments int
		wantChildren int
		wantForm     string
	}{
		{name: "automatic keeps short text in one chunk", wantSegments: 1, wantForm: "text_model"},
		{name: "custom cuts at every separator", rule: &textsplit.ProcessRule{Mode: "custom", Rules: &textsplit.Rules{
			Segmentation: &textsplit.Segmentation{Separator: "\n", MaxTokens: 100}}}, wantSegments: 4, wantForm: "text_model"},
		{name: "custom with a paragraph separator", rule: &textsplit.ProcessRule{Mode: "custom", Rules: &textsplit.Rules{
			Segmentation: &textsplit.Segmentation{Separator: `\n\n`, MaxTokens: 100}}}, wantSegments: 2, wantForm: "text_model"},
		{name: "hierarchical paragraphs with line children", rule: &textsplit.ProcessRule{Mode: "hierarchical", Rules: &textsplit.Rules{
			ParentMode: "paragraph"}}, wantSegments: 2, wantChildren: 4, wantForm: "hierarchical_model"},
		{name: "hierarchical full-doc", rule: &textsplit.ProcessRule{Mode: "hierarchical", Rules: &textsplit.Rules{
			ParentMode: "full-doc"}}, wantSegments: 1, wantChildren: 4, wantForm: "hierarchical_model"},
		{name: "qa_model makes one question per chunk", docForm: "qa_model", rule: &textsplit.ProcessRule{Mode: "custom", Rules: &textsplit.Rules{
			Segmentation: &textsplit.Segmentation{Separator: `\n\n`, MaxTokens: 100}}}, wantSegments: 2, wantForm: "qa_model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, datasets.TechniqueHighQuality)
			f.start(t)
			st := documents.Settings{ProcessRule: tc.rule}
			if tc.docForm != "" {
				st.DocForm = &tc.docForm
			}
			out, err := f.svc.CreateFromText(context.Background(), f.actor, f.dataset, "doc", sample, st)
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Document.DocForm; got != tc.wantForm {
				t.Fatalf("doc_form = %q, want %q", got, tc.wantForm)
			}
			status := f.wait(t, out.Batch)
			if status[0].IndexingStatus != "completed" || status[0].TotalSegments != tc.wantSegments || status[0].CompletedSegments != tc.wantSegments {
				t.Fatalf("status = %+v, want completed with %d segments", status[0], tc.wantSegments)
			}
			if got := f.count(t, `SELECT COUNT(*) FROM child_chunks`); got != tc.wantChildren {
				t.Fatalf("child chunks = %d, want %d", got, tc.wantChildren)
			}
			// Vectors: one per chunk, or one per child in parent-child documents.
			wantVectors := tc.wantSegments
			if tc.wantChildren > 0 {
				wantVectors = tc.wantChildren
			}
			if got := f.count(t, `SELECT COUNT(*) FROM segment_embeddings`); got != wantVectors {
				t.Fatalf("vectors = %d, want %d", got, wantVectors)
			}
			if got := f.fullTextMatches(t, "birds"); got != 1 && tc.docForm == "" {
				t.Fatalf("full-text matches for birds = %d, want 1", got)
			}
			if tc.docForm == "qa_model" {
				list, err := f.svc.ListSegments(context.Background(), f.actor, f.dataset, out.Document.ID, documents.SegmentQuery{})
				if err != nil {
					t.Fatal(err)
				}
				if got := list.Data[0].Content; got != "Alpha paragraph one about cats?" || list.Data[0].Answer == "" {
					t.Fatalf("qa chunk = %q / %q", got, list.Data[0].Answer)
				}
			}
		})
	}
}

func TestFileFormats(t *testing.T) {
	files, err := filepath.Glob("../../platform/docparse/testdata/sample*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample files: %v", err)
	}
	f := newFixture(t, datasets.TechniqueEconomy)
	f.start(t)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			out, err := f.svc.CreateFromFile(context.Background(), f.actor, f.dataset,
				documents.Upload{Name: filepath.Base(path), Body: bytes.NewReader(data)}, documents.Settings{})
			if err != nil {
				t.Fatal(err)
			}
			st := f.wait(t, out.Batch)[0]
			if st.IndexingStatus != "completed" {
				t.Fatalf("status %s: %v", st.IndexingStatus, st.Error)
			}
			if filepath.Base(path) != "sample-untitled.pdf" && st.TotalSegments == 0 {
				t.Fatalf("no chunks from %s", path)
			}
		})
	}
	t.Run("unsupported type is 415", func(t *testing.T) {
		_, err := f.svc.CreateFromFile(context.Background(), f.actor, f.dataset,
			documents.Upload{Name: "x.exe", Body: bytes.NewReader([]byte("MZ"))}, documents.Settings{})
		if !apperr.Is(err, apperr.CodeUnsupportedFileType) || apperr.From(err).Status != 415 {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("corrupt file ends in error", func(t *testing.T) {
		out, err := f.svc.CreateFromFile(context.Background(), f.actor, f.dataset,
			documents.Upload{Name: "broken.docx", Body: bytes.NewReader([]byte("not a zip"))}, documents.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		st := f.wait(t, out.Batch)[0]
		if st.IndexingStatus != "error" || st.Error == nil || *st.Error == "" {
			t.Fatalf("status = %+v", st)
		}
	})
}

func TestRestartResumesIndexing(t *testing.T) {
	f := newFixture(t, datasets.TechniqueHighQuality)
	ctx := context.Background()
	// Queued without workers, and one caught mid-way by a "crash".
	a, err := f.svc.CreateFromText(ctx, f.actor, f.dataset, "a", sample, documents.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.svc.CreateFromText(ctx, f.actor, f.dataset, "b", sample, documents.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.db.Exec(`UPDATE indexing_jobs SET state = 'running', attempts = 1 WHERE document_id = ?`, b.Document.ID).Error; err != nil {
		t.Fatal(err)
	}
	if err := f.db.Exec(`UPDATE documents SET indexing_status = 'splitting' WHERE id = ?`, b.Document.ID).Error; err != nil {
		t.Fatal(err)
	}
	f.start(t)
	for _, batch := range []string{a.Batch, b.Batch} {
		if st := f.wait(t, batch)[0]; st.IndexingStatus != "completed" {
			t.Fatalf("batch %s: %+v", batch, st)
		}
	}
	if n := f.count(t, `SELECT COUNT(*) FROM indexing_jobs`); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}

func TestDeleteCascadesAndArchive(t *testing.T) {
	f := newFixture(t, datasets.TechniqueHighQuality)
	f.start(t)
	ctx := context.Background()
	rule := &textsplit.ProcessRule{Mode: "hierarchical"}
	out, err := f.svc.CreateFromText(ctx, f.actor, f.dataset, "doc", sample, documents.Settings{ProcessRule: rule})
	if err != nil {
		t.Fatal(err)
	}
	f.wait(t, out.Batch)
	id := out.Document.ID

	if err := f.svc.SetStatus(ctx, f.actor, f.dataset, documents.ActionArchive, []string{id}); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"delete":  f.svc.DeleteDocument(ctx, f.actor, f.dataset, id),
		"disable": f.svc.SetStatus(ctx, f.actor, f.dataset, documents.ActionDisable, []string{id}),
	} {
		if !apperr.Is(err, apperr.CodeArchivedImmutable) {
			t.Fatalf("%s archived: err = %v", name, err)
		}
	}
	if _, err := f.svc.UpdateDocument(ctx, f.actor, f.dataset, id, documents.UpdateParams{}); !apperr.Is(err, apperr.CodeArchivedImmutable) {
		t.Fatalf("update archived: err = %v", err)
	}
	if err := f.svc.SetStatus(ctx, f.actor, f.dataset, documents.ActionUnarchive, []string{id}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DeleteDocument(ctx, f.actor, f.dataset, id); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"segments", "child_chunks", "segment_embeddings", "indexing_jobs"} {
		if n := f.count(t, `SELECT COUNT(*) FROM `+table); n != 0 {
			t.Fatalf("%s has %d rows after delete", table, n)
		}
	}
	if n := f.fullTextMatches(t, "birds"); n != 0 {
		t.Fatalf("full-text index still matches after delete")
	}
	if _, err := blobs.For(f.db, f.dataDir).Stat(ctx, "datasets/"+f.dataset+"/"+id); !errors.Is(err, blobs.ErrNotFound) {
		t.Fatalf("stored file still there: %v", err)
	}
}
