package documents

import (
	"context"
	"slices"
	"time"

	"gorm.io/gorm"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// Status actions of SetStatus.
const (
	ActionEnable    = "enable"
	ActionDisable   = "disable"
	ActionArchive   = "archive"
	ActionUnarchive = "un_archive"
)

// SetStatus applies one status action to several documents. Every id must
// name a document of the knowledge base (else 404). Disabling or archiving
// a document that is still being indexed fails with 400 invalid_action;
// enabling or disabling an archived one with 403 archived_document_immutable.
func (s *Service) SetStatus(ctx context.Context, actor datasets.Actor, datasetID, action string, ids []string) error {
	if _, err := s.kb.FindDataset(ctx, actor, datasetID); err != nil {
		return err
	}
	if !slices.Contains([]string{ActionEnable, ActionDisable, ActionArchive, ActionUnarchive}, action) {
		return apperr.Fail(apperr.CodeInvalidAction, "Unknown action %q.", action)
	}
	ids = cleanIDs(ids)
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var docs []models.Document
		if err := tx.Where("dataset_id = ? AND id IN ?", datasetID, ids).Find(&docs).Error; err != nil {
			return err
		}
		if len(docs) != len(ids) {
			for _, id := range ids {
				if !slices.ContainsFunc(docs, func(d models.Document) bool { return d.ID == id }) {
					return errDocumentNotFound(id)
				}
			}
		}
		now := time.Now().UTC()
		for i := range docs {
			d := &docs[i]
			switch action {
			case ActionEnable, ActionDisable:
				if d.Archived {
					return errArchived()
				}
				if action == ActionDisable && d.IndexingStatus != StatusCompleted {
					return apperr.Fail(apperr.CodeInvalidAction, "Document %s is not indexed yet and cannot be disabled.", d.ID)
				}
				d.Enabled = action == ActionEnable
				if d.Enabled {
					d.DisabledAt, d.DisabledBy = nil, nil
				} else if d.DisabledAt == nil {
					by := actor.KeyID
					d.DisabledAt, d.DisabledBy = &now, &by
				}
			case ActionArchive:
				if d.IndexingStatus != StatusCompleted && d.IndexingStatus != StatusError {
					return apperr.Fail(apperr.CodeInvalidAction, "Document %s is being indexed and cannot be archived.", d.ID)
				}
				if !d.Archived {
					d.Archived, d.ArchivedAt = true, &now
				}
			case ActionUnarchive:
				d.Archived, d.ArchivedAt = false, nil
			}
			if err := tx.Save(d).Error; err != nil {
				return err
			}
		}
		return nil
	})
}

// IndexingStatus is the progress of one document of a batch.
type IndexingStatus struct {
	ID                   string  `json:"id"`
	IndexingStatus       string  `json:"indexing_status"`
	ProcessingStartedAt  *int64  `json:"processing_started_at"`
	ParsingCompletedAt   *int64  `json:"parsing_completed_at"`
	CleaningCompletedAt  *int64  `json:"cleaning_completed_at"`
	SplittingCompletedAt *int64  `json:"splitting_completed_at"`
	CompletedAt          *int64  `json:"completed_at"`
	PausedAt             *int64  `json:"paused_at"`
	Error                *string `json:"error"`
	StoppedAt            *int64  `json:"stopped_at"`
	CompletedSegments    int     `json:"completed_segments"`
	TotalSegments        int     `json:"total_segments"`
}

// BatchStatus reports the progress of every document of a batch; an
// unknown batch is 404. Documents whose chunks a pending keyword rebuild
// has yet to reach are reported as indexing, with its progress.
func (s *Service) BatchStatus(ctx context.Context, actor datasets.Actor, datasetID, batch string) ([]IndexingStatus, error) {
	if _, err := s.kb.FindDataset(ctx, actor, datasetID); err != nil {
		return nil, err
	}
	var docs []models.Document
	if err := s.db.WithContext(ctx).Where("dataset_id = ? AND batch = ?", datasetID, batch).Order("position").Find(&docs).Error; err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, apperr.NotFound("Batch %s not found.", batch)
	}
	out := make([]IndexingStatus, 0, len(docs))
	for _, d := range docs {
		out = append(out, IndexingStatus{
			ID: d.ID, IndexingStatus: d.IndexingStatus,
			ProcessingStartedAt: unixPtr(d.ProcessingStartedAt), ParsingCompletedAt: unixPtr(d.ParsingCompletedAt),
			CleaningCompletedAt: unixPtr(d.CleaningCompletedAt), SplittingCompletedAt: unixPtr(d.SplittingCompletedAt),
			CompletedAt: unixPtr(d.CompletedAt), PausedAt: unixPtr(d.PausedAt), Error: d.Error, StoppedAt: unixPtr(d.StoppedAt),
			CompletedSegments: d.CompletedSegments, TotalSegments: d.TotalSegments,
		})
	}
	// A keyword rebuild after an upgrade re-indexes chunks in the
	// background; its progress shows here (see rebuildProgress).
	if err := rebuildProgress(ctx, s.db, out); err != nil {
		return nil, err
	}
	return out, nil
}
