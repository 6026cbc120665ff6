package indexing

import (
	"context"
	"errors"
	"os"

	"gorm.io/gorm"

	"appkb/apperr"
	"appkb/knowledge"
	"appkb/models"
)

// StoredFile is the original file of a document.
type StoredFile struct {
	Path, Name, MimeType string
	Size                 int64
}

// File returns the original file of a document (404 when it is gone).
func (s *Service) File(ctx context.Context, actor knowledge.Actor, datasetID, documentID string) (*StoredFile, error) {
	_, d, err := s.findDocument(ctx, actor, datasetID, documentID)
	if err != nil {
		return nil, err
	}
	return s.fileOf(d)
}

func (s *Service) fileOf(d *models.Document) (*StoredFile, error) {
	path := filePath(s.dataDir, d.DatasetID, d.ID)
	if _, err := os.Stat(path); err != nil {
		return nil, apperr.NotFound("The file of document %s is missing.", d.ID)
	}
	return &StoredFile{Path: path, Name: d.FileName, MimeType: d.FileMimeType, Size: d.FileSize}, nil
}

// Files returns the original files of several documents, in the order asked.
func (s *Service) Files(ctx context.Context, actor knowledge.Actor, datasetID string, ids []string) ([]StoredFile, error) {
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
		f, err := s.fileOf(&d)
		if err != nil {
			return nil, err
		}
		out = append(out, *f)
	}
	return out, nil
}
