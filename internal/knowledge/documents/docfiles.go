package documents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"gorm.io/gorm"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/blobs"
	"appkb/models"
)

// StoredFile is the original file of a document.
type StoredFile struct {
	// Key names the bytes in the blob store.
	Key            string
	Name, MimeType string
	Size           int64
	store          blobs.Store
}

// Open opens the file's bytes; the caller closes them. The reader also
// seeks (see blobs.Store.Open).
func (f *StoredFile) Open(ctx context.Context) (io.ReadCloser, int64, error) {
	r, size, err := f.store.Open(ctx, f.Key)
	if errors.Is(err, blobs.ErrNotFound) {
		return nil, 0, apperr.NotFound("The file %s is missing.", f.Name)
	}
	return r, size, err
}

// File returns the original file of a document (404 when it is gone).
func (s *Service) File(ctx context.Context, actor datasets.Actor, datasetID, documentID string) (*StoredFile, error) {
	_, d, err := s.findDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return nil, err
	}
	return s.fileOf(ctx, d)
}

func (s *Service) fileOf(ctx context.Context, d *models.Document) (*StoredFile, error) {
	key := fileKey(d.DatasetID, d.ID)
	size, err := s.blobs.Stat(ctx, key)
	if errors.Is(err, blobs.ErrNotFound) {
		return nil, apperr.NotFound("The file of document %s is missing.", d.ID)
	}
	if err != nil {
		return nil, err
	}
	return &StoredFile{Key: key, Name: d.FileName, MimeType: d.FileMimeType, Size: size, store: s.blobs}, nil
}

// openFile opens the stored original of a document for indexing.
func (s *Service) openFile(ctx context.Context, d *models.Document) (io.ReadCloser, error) {
	r, _, err := s.blobs.Open(ctx, fileKey(d.DatasetID, d.ID))
	if err != nil {
		return nil, fmt.Errorf("open the original: %w", err)
	}
	return r, nil
}

// Files returns the original files of several documents, in the order asked.
func (s *Service) Files(ctx context.Context, actor datasets.Actor, datasetID string, ids []string) ([]StoredFile, error) {
	if _, err := s.kb.FindDataset(ctx, actor, datasetID); err != nil {
		return nil, err
	}
	var out []StoredFile
	for _, id := range cleanIDs(ids) {
		var d models.Document
		err := s.db.WithContext(ctx).Take(&d, "id = ? AND dataset_id = ?", id, datasetID).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, errDocumentNotFound(id)
		}
		if err != nil {
			return nil, err
		}
		f, err := s.fileOf(ctx, &d)
		if err != nil {
			return nil, err
		}
		out = append(out, *f)
	}
	return out, nil
}

// DeleteDataset deletes a knowledge base (see datasets.Store.DeleteDataset)
// and then the files of its documents.
func (s *Service) DeleteDataset(ctx context.Context, actor datasets.Actor, datasetID string) error {
	if err := s.kb.DeleteDataset(ctx, actor, datasetID); err != nil {
		return err
	}
	if err := s.blobs.DeleteUnder(ctx, datasetDir(datasetID)); err != nil {
		// The knowledge base is gone; what is left is only wasted space.
		slog.Warn("files of a deleted knowledge base stay", "dataset_id", datasetID, "error", err)
	}
	return nil
}
