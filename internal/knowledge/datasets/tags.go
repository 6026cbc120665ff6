package datasets

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"appkb/internal/platform/apperr"
	"appkb/models"
)

// TagTypeKnowledge is the kind of every tag kept here.
const TagTypeKnowledge = "knowledge"

// MaxTagName is the longest tag name, in characters.
const MaxTagName = 50

// Tag is a workspace tag with the number of knowledge bases carrying it.
// BindingCount is a decimal string, as the API writes it.
type Tag struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Type         string `json:"type"`
	BindingCount string `json:"binding_count"`
}

// TagRef is a tag as GET /datasets/{id}/tags lists it.
type TagRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

const errTagNameTaken = "Tag name already exists"

func errTagNotFound(id string) error { return apperr.NotFound("Tag %s not found.", id) }

// CreateTag makes a tag. A name in use fails with 400 invalid_param.
func (s *Store) CreateTag(ctx context.Context, actor Actor, name string) (*Tag, error) {
	if err := actor.workspaceWide("create tags"); err != nil {
		return nil, err
	}
	name, err := checkName("name", name, MaxTagName)
	if err != nil {
		return nil, err
	}
	tag := models.DatasetTag{Name: name, CreatedBy: actor.KeyID}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tagNameFree(tx, name, ""); err != nil {
			return err
		}
		return tx.Create(&tag).Error
	})
	if isDuplicate(err) {
		return nil, apperr.InvalidParam(errTagNameTaken)
	}
	if err != nil {
		return nil, err
	}
	return &Tag{ID: tag.ID, Name: tag.Name, Type: TagTypeKnowledge, BindingCount: "0"}, nil
}

// ListTags returns every tag, newest first. For a scoped key the counts
// include only its own knowledge bases.
func (s *Store) ListTags(ctx context.Context, actor Actor) ([]Tag, error) {
	return s.tags(s.db.WithContext(ctx), actor, "")
}

// tags counts bindings per tag, for one tag when id is set.
func (s *Store) tags(tx *gorm.DB, actor Actor, id string) ([]Tag, error) {
	var b strings.Builder
	var args []any
	b.WriteString(`SELECT t.id, t.name, COUNT(b.dataset_id) AS bindings FROM dataset_tags t
		LEFT JOIN dataset_tag_bindings b ON b.tag_id = t.id`)
	if actor.Scoped() {
		b.WriteString(` AND b.dataset_id IN ?`)
		args = append(args, actor.Datasets)
	}
	if id != "" {
		b.WriteString(` WHERE t.id = ?`)
		args = append(args, id)
	}
	b.WriteString(` GROUP BY t.id, t.name, t.created_at ORDER BY t.created_at DESC, t.id`)
	var rows []struct {
		ID       string
		Name     string
		Bindings int
	}
	if err := tx.Raw(b.String(), args...).Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]Tag, 0, len(rows))
	for _, r := range rows {
		out = append(out, Tag{ID: r.ID, Name: r.Name, Type: TagTypeKnowledge, BindingCount: strconv.Itoa(r.Bindings)})
	}
	return out, nil
}

// RenameTag gives a tag a new name: 404 not_found for an unknown tag, 400
// invalid_param for a name another tag has.
func (s *Store) RenameTag(ctx context.Context, actor Actor, id, name string) (*Tag, error) {
	if err := actor.workspaceWide("rename tags"); err != nil {
		return nil, err
	}
	name, err := checkName("name", name, MaxTagName)
	if err != nil {
		return nil, err
	}
	var out *Tag
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var tag models.DatasetTag
		err := tx.Take(&tag, "id = ?", id).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return errTagNotFound(id)
		}
		if err != nil {
			return err
		}
		if err := tagNameFree(tx, name, id); err != nil {
			return err
		}
		if err := tx.Model(&tag).Update("name", name).Error; err != nil {
			return err
		}
		tags, err := s.tags(tx, actor, id)
		if err != nil {
			return err
		}
		out = &tags[0]
		return nil
	})
	if isDuplicate(err) {
		return nil, apperr.InvalidParam(errTagNameTaken)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteTag removes a tag and its bindings; the knowledge bases stay.
func (s *Store) DeleteTag(ctx context.Context, actor Actor, id string) error {
	if err := actor.workspaceWide("delete tags"); err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Delete(&models.DatasetTag{}, "id = ?", id)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errTagNotFound(id)
	}
	return nil
}

// BindTags attaches tags to a knowledge base. Tags that do not exist and
// tags already attached are skipped.
func (s *Store) BindTags(ctx context.Context, actor Actor, datasetID string, tagIDs []string) error {
	if _, err := s.FindDataset(ctx, actor, datasetID); err != nil {
		return err
	}
	tagIDs = CleanIDs(tagIDs)
	if len(tagIDs) == 0 {
		return apperr.InvalidParam("tag_ids must name at least one tag.")
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var known []string
		if err := tx.Model(&models.DatasetTag{}).Where("id IN ?", tagIDs).Pluck("id", &known).Error; err != nil {
			return err
		}
		if len(known) == 0 {
			return nil
		}
		bindings := make([]models.DatasetTagBinding, len(known))
		for i, id := range known {
			bindings[i] = models.DatasetTagBinding{TagID: id, DatasetID: datasetID}
		}
		err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&bindings).Error
		if errors.Is(err, gorm.ErrForeignKeyViolated) {
			// The knowledge base went away in the meantime.
			return errDatasetNotFound(datasetID)
		}
		return err
	})
}

// UnbindTags detaches tags from a knowledge base; tags not attached are
// skipped.
func (s *Store) UnbindTags(ctx context.Context, actor Actor, datasetID string, tagIDs []string) error {
	if _, err := s.FindDataset(ctx, actor, datasetID); err != nil {
		return err
	}
	tagIDs = CleanIDs(tagIDs)
	if len(tagIDs) == 0 {
		return apperr.InvalidParam("tag_ids (or tag_id) must name at least one tag.")
	}
	return s.db.WithContext(ctx).
		Where("dataset_id = ? AND tag_id IN ?", datasetID, tagIDs).
		Delete(&models.DatasetTagBinding{}).Error
}

// DatasetTags lists the tags attached to a knowledge base, by name.
func (s *Store) DatasetTags(ctx context.Context, actor Actor, datasetID string) ([]TagRef, error) {
	if _, err := s.FindDataset(ctx, actor, datasetID); err != nil {
		return nil, err
	}
	out := []TagRef{}
	err := s.db.WithContext(ctx).Raw(`SELECT t.id, t.name FROM dataset_tag_bindings b
		JOIN dataset_tags t ON t.id = b.tag_id
		WHERE b.dataset_id = ? ORDER BY t.name, t.id`, datasetID).Scan(&out).Error
	return out, err
}

// tagNameFree fails with 400 when a tag other than exceptID has name.
func tagNameFree(tx *gorm.DB, name, exceptID string) error {
	var n int64
	if err := tx.Model(&models.DatasetTag{}).Where("name = ? AND id <> ?", name, exceptID).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return apperr.InvalidParam(errTagNameTaken)
	}
	return nil
}
