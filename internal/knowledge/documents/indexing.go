// Package indexing keeps the documents of appkb's knowledge bases and their
// chunks, and turns documents into searchable chunks in the background.
//
// # Documents
//
// A document is created from text or from an uploaded file. Either way the
// original is stored in the blob store (package blobs) under the key
// datasets/<dataset>/<document> (text as a .txt file, as Dify does): a file
// at that path under the data directory with SQLite, a row of the blobs
// table with PostgreSQL, so that every replica can index and serve it. The
// document row is written with
// status "waiting" and a batch id, and an indexing job is queued in the
// indexing_jobs table. The call returns at once.
//
// # Indexing
//
// Start runs a pool of workers that take queued jobs and move each document
// through parsing (docparse), cleaning and splitting (textsplit, per the
// document's process rule) and indexing, which writes the chunks, the child
// chunks of parent-child documents, keywords, and for high_quality knowledge
// bases the vectors of the knowledge base's embedding model. The full-text
// index (FTS5) follows the chunk tables through triggers. Failures end in
// status "error" with the reason in the document's error field.
//
// Because the queue is a table, a job that was running when the process
// stopped is queued again by the next Start and completes then. A job that
// keeps being interrupted gives up after MaxAttempts with an error.
//
// Re-queuing a document (an update) raises the job's generation; a worker
// still busy with an older generation notices before each write and stops
// without writing.
//
// # Access
//
// Every operation takes a datasets.Actor and checks it with
// datasets.Store.FindDataset: 403 forbidden outside a scoped key's
// knowledge bases, 404 not_found for unknown ones. Archived documents are
// read-only: changing or deleting them fails with 403
// archived_document_immutable.
package documents

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	appdb "appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/textsplit"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/blobs"
	"appkb/models"
)

// Document forms (chunk layouts).
const (
	FormText         = "text_model"
	FormHierarchical = "hierarchical_model"
	FormQA           = "qa_model"
)

// Indexing statuses of documents.
const (
	StatusWaiting   = "waiting"
	StatusParsing   = "parsing"
	StatusCleaning  = "cleaning"
	StatusSplitting = "splitting"
	StatusIndexing  = "indexing"
	StatusCompleted = "completed"
	StatusError     = "error"
	StatusPaused    = "paused"
)

// Child chunk types.
const (
	ChildAutomatic  = "automatic"
	ChildCustomized = "customized"
)

// MaxPageSize is the largest page the list operations return.
const MaxPageSize = 100

// Service reads and changes documents and chunks. It starts no goroutines;
// see Start for the workers.
type Service struct {
	db     *gorm.DB
	models *llm.Registry
	blobs  blobs.Store
	kb     *datasets.Store
}

// NewService returns a Service over db; files live in the blob store
// blobs.For picks for db and dataDir, and models resolves embedding models
// (nil means the builtin ones only).
func NewService(db *gorm.DB, models *llm.Registry, dataDir string) *Service {
	return &Service{db: db, models: models, blobs: blobs.For(db, dataDir), kb: datasets.NewStore(db, models)}
}

// fileKey is the blob key of the original file of a document.
func fileKey(datasetID, documentID string) string {
	return datasetDir(datasetID) + "/" + documentID
}

// datasetDir is the key prefix of the files of a knowledge base.
func datasetDir(datasetID string) string { return "datasets/" + datasetID }

func errDocumentNotFound(id string) error { return apperr.NotFound("Document %s not found.", id) }

func errArchived() error {
	return apperr.Fail(apperr.CodeArchivedImmutable, "The document is archived and cannot be changed.")
}

// findDocument loads a document of a knowledge base the actor may use.
func (s *Service) findDocument(ctx context.Context, actor datasets.Actor, datasetID, documentID string) (*models.Dataset, *models.Document, error) {
	ds, err := s.kb.FindDataset(ctx, actor, datasetID)
	if err != nil {
		return nil, nil, err
	}
	var doc models.Document
	err = s.db.WithContext(ctx).Take(&doc, "id = ? AND dataset_id = ?", documentID, datasetID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil, errDocumentNotFound(documentID)
	}
	if err != nil {
		return nil, nil, err
	}
	return ds, &doc, nil
}

// wordCount counts characters, as Dify's word_count does.
func wordCount(s string) int { return utf8.RuneCountInString(s) }

func hashText(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// EncodeVector packs a vector as little-endian float32s.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// DecodeVector unpacks what EncodeVector packed.
func DecodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// ModelKey names an embedding model in segment_embeddings.
func ModelKey(provider, model string) string { return llm.NormalizeProvider(provider) + "/" + model }

// embedder returns the embedding model of a high_quality knowledge base and
// its key, or nil for economy ones.
func (s *Service) embedder(ds *models.Dataset) (llm.Embedder, string, error) {
	if ds.IndexingTechnique == nil || *ds.IndexingTechnique != datasets.TechniqueHighQuality {
		return nil, "", nil
	}
	e, err := s.models.Embedding(ds.EmbeddingModelProvider, ds.EmbeddingModel)
	if err != nil {
		return nil, "", err
	}
	return e, ModelKey(ds.EmbeddingModelProvider, ds.EmbeddingModel), nil
}

// ruleOf decodes the stored process rule of a document.
func ruleOf(doc *models.Document) (textsplit.Config, error) {
	var r textsplit.ProcessRule
	if err := json.Unmarshal([]byte(doc.ProcessRule), &r); err != nil {
		return textsplit.Config{}, fmt.Errorf("stored process rule: %w", err)
	}
	return r.Resolve()
}

func unixPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	u := t.Unix()
	return &u
}

func keywordsJSON(kw []string) string {
	if kw == nil {
		kw = []string{}
	}
	b, _ := json.Marshal(kw)
	return string(b)
}

// removeFile deletes a stored file; a file that cannot be removed is only
// wasted space, since no row points at it any more. It runs on a context
// of its own, as it often cleans up after a request that failed or was
// cancelled.
func (s *Service) removeFile(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.blobs.Delete(ctx, key)
}

// The shared helpers, under the names this package's files use.
var (
	escapeLike = appdb.EscapeLike
	cleanIDs   = datasets.CleanIDs
)

func pageArgs(page, limit, defLimit int) (int, int, error) {
	if page == 0 {
		page = 1
	}
	if limit == 0 {
		limit = defLimit
	}
	if page < 1 {
		return 0, 0, apperr.InvalidParam("page must be at least 1.")
	}
	if limit < 1 {
		return 0, 0, apperr.InvalidParam("limit must be at least 1.")
	}
	if limit > MaxPageSize {
		limit = MaxPageSize
	}
	return page, limit, nil
}
