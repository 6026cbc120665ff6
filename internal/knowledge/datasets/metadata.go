package datasets

import (
	"context"
	"errors"
	"slices"

	"gorm.io/gorm"

	"appkb/internal/platform/apperr"
	"appkb/models"
)

// Value types of metadata fields.
const (
	MetadataString = "string"
	MetadataNumber = "number"
	MetadataTime   = "time"
)

// MaxMetadataName is the longest metadata field name, in characters.
const MaxMetadataName = 255

// BuiltInFieldID is the id under which a knowledge base's doc_metadata lists
// the built-in fields while they are switched on.
const BuiltInFieldID = "built-in"

// BuiltInField is a metadata field that appkb fills in for every document.
type BuiltInField struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Names of the built-in fields.
const (
	FieldDocumentName   = "document_name"
	FieldUploader       = "uploader"
	FieldUploadDate     = "upload_date"
	FieldLastUpdateDate = "last_update_date"
	FieldSource         = "source"
)

// BuiltInFields are Dify's built-in metadata fields, in Dify's order.
var BuiltInFields = []BuiltInField{
	{FieldDocumentName, MetadataString},
	{FieldUploader, MetadataString},
	{FieldUploadDate, MetadataTime},
	{FieldLastUpdateDate, MetadataTime},
	{FieldSource, MetadataString},
}

var metadataTypes = []string{MetadataString, MetadataNumber, MetadataTime}

// MetadataField is a custom metadata field.
type MetadataField struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// MetadataUsage is a custom field with the number of documents that have a
// value for it.
type MetadataUsage struct {
	MetadataField
	Count int `json:"count"`
}

// MetadataList is what GET /datasets/{id}/metadata returns.
type MetadataList struct {
	DocMetadata         []MetadataUsage `json:"doc_metadata"`
	BuiltInFieldEnabled bool            `json:"built_in_field_enabled"`
}

func errMetadataNotFound(id string) error { return apperr.NotFound("Metadata field %s not found.", id) }

// CreateMetadataField adds a custom field to a knowledge base. The name must
// be new in the knowledge base and not one of the built-in fields.
func (s *Store) CreateMetadataField(ctx context.Context, actor Actor, datasetID, name, typ string) (*MetadataField, error) {
	if _, err := s.FindDataset(ctx, actor, datasetID); err != nil {
		return nil, err
	}
	name, err := checkMetadataName(name)
	if err != nil {
		return nil, err
	}
	if err := checkEnum("type", typ, metadataTypes); err != nil {
		return nil, err
	}
	row := models.DatasetMetadataField{DatasetID: datasetID, Name: name, Type: typ, CreatedBy: actor.KeyID, UpdatedBy: actor.KeyID}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := metadataNameFree(tx, datasetID, name, ""); err != nil {
			return err
		}
		return tx.Create(&row).Error
	})
	switch {
	case isDuplicate(err):
		return nil, apperr.InvalidParam("Metadata name already exists.")
	case errors.Is(err, gorm.ErrForeignKeyViolated):
		return nil, errDatasetNotFound(datasetID)
	case err != nil:
		return nil, err
	}
	return &MetadataField{ID: row.ID, Name: row.Name, Type: row.Type}, nil
}

// ListMetadataFields returns the custom fields of a knowledge base, oldest
// first, with their use counts.
func (s *Store) ListMetadataFields(ctx context.Context, actor Actor, datasetID string) (*MetadataList, error) {
	ds, err := s.FindDataset(ctx, actor, datasetID)
	if err != nil {
		return nil, err
	}
	var rows []models.DatasetMetadataField
	if err := s.db.WithContext(ctx).Where("dataset_id = ?", datasetID).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, err
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	counts, err := s.metadataUsage(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := &MetadataList{DocMetadata: make([]MetadataUsage, 0, len(rows)), BuiltInFieldEnabled: ds.BuiltInFieldEnabled}
	for _, r := range rows {
		out.DocMetadata = append(out.DocMetadata, MetadataUsage{
			MetadataField: MetadataField{ID: r.ID, Name: r.Name, Type: r.Type},
			Count:         counts[r.ID],
		})
	}
	return out, nil
}

// RenameMetadataField gives a custom field a new name.
func (s *Store) RenameMetadataField(ctx context.Context, actor Actor, datasetID, fieldID, name string) (*MetadataField, error) {
	if _, err := s.FindDataset(ctx, actor, datasetID); err != nil {
		return nil, err
	}
	name, err := checkMetadataName(name)
	if err != nil {
		return nil, err
	}
	var row models.DatasetMetadataField
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Take(&row, "id = ? AND dataset_id = ?", fieldID, datasetID).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return errMetadataNotFound(fieldID)
		}
		if err != nil {
			return err
		}
		if err := metadataNameFree(tx, datasetID, name, fieldID); err != nil {
			return err
		}
		row.Name = name
		row.UpdatedBy = actor.KeyID
		return tx.Save(&row).Error
	})
	if isDuplicate(err) {
		return nil, apperr.InvalidParam("Metadata name already exists.")
	}
	if err != nil {
		return nil, err
	}
	return &MetadataField{ID: row.ID, Name: row.Name, Type: row.Type}, nil
}

// DeleteMetadataField removes a custom field; the documents' values for it
// go with it through their foreign key.
func (s *Store) DeleteMetadataField(ctx context.Context, actor Actor, datasetID, fieldID string) error {
	if _, err := s.FindDataset(ctx, actor, datasetID); err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Delete(&models.DatasetMetadataField{}, "id = ? AND dataset_id = ?", fieldID, datasetID)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errMetadataNotFound(fieldID)
	}
	return nil
}

// GetBuiltInFields returns the built-in fields, after checking that the
// knowledge base exists and may be used.
func (s *Store) GetBuiltInFields(ctx context.Context, actor Actor, datasetID string) ([]BuiltInField, error) {
	if _, err := s.FindDataset(ctx, actor, datasetID); err != nil {
		return nil, err
	}
	return slices.Clone(BuiltInFields), nil
}

// SetBuiltInFields switches the built-in fields of a knowledge base on or off.
func (s *Store) SetBuiltInFields(ctx context.Context, actor Actor, datasetID string, enabled bool) error {
	if err := actor.mayUse(datasetID); err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Model(&models.Dataset{}).Where("id = ?", datasetID).
		Updates(map[string]any{"built_in_field_enabled": enabled, "updated_by": actor.KeyID})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errDatasetNotFound(datasetID)
	}
	return nil
}

// checkMetadataName trims a field name and checks its length and that it
// is not a built-in field's.
func checkMetadataName(name string) (string, error) {
	name, err := checkName("name", name, MaxMetadataName)
	if err != nil {
		return "", err
	}
	for _, f := range BuiltInFields {
		if f.Name == name {
			return "", apperr.InvalidParam("Metadata name already exists in Built-in fields.")
		}
	}
	return name, nil
}

// metadataNameFree fails with 400 when a field of the knowledge base other
// than exceptID has name.
func metadataNameFree(tx *gorm.DB, datasetID, name, exceptID string) error {
	var n int64
	err := tx.Model(&models.DatasetMetadataField{}).
		Where("dataset_id = ? AND name = ? AND id <> ?", datasetID, name, exceptID).Count(&n).Error
	if err != nil {
		return err
	}
	if n > 0 {
		return apperr.InvalidParam("Metadata name already exists.")
	}
	return nil
}
