package documents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"gorm.io/gorm"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// MetadataOp sets custom metadata values on one document. Without Partial
// the given values replace all of the document's values.
type MetadataOp struct {
	DocumentID string
	Values     map[string]any // field id → value (nil removes it)
	Partial    bool
}

// SetMetadata applies metadata operations to documents of a knowledge base
// in one transaction. Field ids must be fields of the knowledge base, and
// number fields take numbers (or numeric text).
func (s *Service) SetMetadata(ctx context.Context, actor datasets.Actor, datasetID string, ops []MetadataOp) error {
	if _, err := s.kb.FindDataset(ctx, actor, datasetID); err != nil {
		return err
	}
	fields, err := s.fields(ctx, datasetID)
	if err != nil {
		return err
	}
	byID := map[string]models.DatasetMetadataField{}
	for _, f := range fields {
		byID[f.ID] = f
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, op := range ops {
			var d models.Document
			err := tx.Take(&d, "id = ? AND dataset_id = ?", op.DocumentID, datasetID).Error
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return errDocumentNotFound(op.DocumentID)
			}
			if err != nil {
				return err
			}
			values := map[string]any{}
			if op.Partial {
				_ = json.Unmarshal([]byte(d.DocMetadata), &values)
			}
			for id, v := range op.Values {
				f, ok := byID[id]
				if !ok {
					return apperr.NotFound("Metadata field %s not found.", id)
				}
				if v == nil {
					delete(values, id)
					continue
				}
				text, err := metadataText(f, v)
				if err != nil {
					return err
				}
				values[id] = text
			}
			b, _ := json.Marshal(values)
			if err := tx.Model(&models.Document{}).Where("id = ?", d.ID).Update("doc_metadata", string(b)).Error; err != nil {
				return err
			}
		}
		return nil
	})
}

// metadataText checks a value against its field's type and returns it as
// the text stored.
func metadataText(f models.DatasetMetadataField, v any) (string, error) {
	var text string
	switch x := v.(type) {
	case string:
		text = x
	case float64:
		text = strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		text = x.String()
	case bool:
		text = strconv.FormatBool(x)
	default:
		return "", apperr.InvalidParam("The value of metadata field %s must be a string or a number.", f.Name)
	}
	if f.Type == "number" || f.Type == "time" {
		if _, err := strconv.ParseFloat(text, 64); err != nil {
			return "", apperr.InvalidParam("The value of metadata field %s must be a number (%s).", f.Name, fmt.Sprint(v))
		}
	}
	return text, nil
}
