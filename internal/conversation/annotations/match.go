package annotations

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"appkb/internal/llm"
	"appkb/models"
)

// lazyBatch bounds how many questions without a vector one Match call
// embeds along with the query; the rest wait for later calls.
const lazyBatch = 64

// scoreTolerance is how far under the threshold a score may be and still
// count as reaching it.
const scoreTolerance = 1e-6

// Match answers query from appID's annotations when annotation reply is
// on: it embeds the query with the app's embedding model and picks the
// annotation whose question is most similar (cosine similarity). When that
// similarity reaches the app's score threshold, the annotation's hit count
// goes up by one, the hit is recorded, and its id and answer are returned
// with ok set. With the feature off, an empty query or no close enough
// annotation, ok is false and err nil.
//
// Questions that have no vector yet under the app's model (added while an
// embedding call failed, or while a switch-on job was still running) are
// embedded in the same model call as the query and stored.
//
// Errors of the embedding model are returned as they are (400 API errors
// such as provider_not_initialize); the caller decides whether a failed
// match should fail its request.
func (s *Service) Match(ctx context.Context, appID, query string) (annotationID, answer string, ok bool, err error) {
	set, err := s.Settings(ctx, appID)
	if err != nil || !set.Enabled || strings.TrimSpace(query) == "" {
		return "", "", false, err
	}
	model := modelKey{set.EmbeddingProviderName, set.EmbeddingModelName}
	embedder, err := s.models.Embedding(model.provider, model.name)
	if err != nil {
		return "", "", false, err
	}

	var missing []models.Annotation
	err = s.db.WithContext(ctx).Select("id", "app_id", "question").
		Where("app_id = ? AND NOT EXISTS (?)", appID, s.vectorOf(model)).
		Order("created_at").Limit(lazyBatch).Find(&missing).Error
	if err != nil {
		return "", "", false, err
	}
	texts := make([]string, 0, 1+len(missing))
	texts = append(texts, query)
	for _, a := range missing {
		texts = append(texts, a.Question)
	}
	vecs, _, err := embedder.Embed(ctx, texts)
	if err != nil {
		return "", "", false, err
	}
	if len(vecs) != len(texts) {
		return "", "", false, fmt.Errorf("embedding model returned %d vectors for %d texts", len(vecs), len(texts))
	}
	if len(missing) > 0 {
		if err := s.storeVectors(ctx, model, missing, vecs[1:]); err != nil {
			return "", "", false, err
		}
	}
	queryVec := decodeVector(encodeVector(vecs[0]))

	var stored []models.AnnotationEmbedding
	err = s.db.WithContext(ctx).Select("annotation_id", "vector").
		Where("app_id = ? AND embedding_provider_name = ? AND embedding_model_name = ?", appID, model.provider, model.name).
		Find(&stored).Error
	if err != nil {
		return "", "", false, err
	}
	bestID, bestScore := "", -2.0
	for _, e := range stored {
		v := decodeVector(e.Vector)
		if len(v) != len(queryVec) {
			continue
		}
		// Ties go to the smaller id, so that the result does not depend
		// on the order rows come back in.
		if score := dot(queryVec, v); score > bestScore || (score == bestScore && e.AnnotationID < bestID) {
			bestID, bestScore = e.AnnotationID, score
		}
	}
	// The tolerance absorbs float32 rounding, so that identical texts reach
	// a threshold of 1.
	if bestID == "" || bestScore+scoreTolerance < set.ScoreThreshold {
		return "", "", false, nil
	}
	a, err := s.recordHit(ctx, appID, bestID, query, bestScore)
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", "", false, nil // deleted in the meantime
	}
	if err != nil {
		return "", "", false, err
	}
	return a.ID, a.Answer, true, nil
}

// recordHit counts a reply from an annotation and logs it.
func (s *Service) recordHit(ctx context.Context, appID, id, query string, score float64) (*models.Annotation, error) {
	var a models.Annotation
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&models.Annotation{}).Where("app_id = ? AND id = ?", appID, id).
			UpdateColumn("hit_count", gorm.Expr("hit_count + 1"))
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return gorm.ErrRecordNotFound
		}
		if err := tx.Omit("embedding").Where("id = ?", id).Take(&a).Error; err != nil {
			return err
		}
		return tx.Create(&models.AnnotationHitHistory{
			AppID:              appID,
			AnnotationID:       id,
			Query:              query,
			Score:              score,
			AnnotationQuestion: a.Question,
			AnnotationAnswer:   a.Answer,
		}).Error
	})
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// embedNow embeds a new or changed question right away when annotation
// reply is on. It never fails the caller: the question is embedded later
// by Match if this does not work.
func (s *Service) embedNow(ctx context.Context, a *models.Annotation) {
	set, err := s.Settings(ctx, a.AppID)
	if err != nil || !set.Enabled {
		return
	}
	model := modelKey{set.EmbeddingProviderName, set.EmbeddingModelName}
	embedder, err := s.models.Embedding(model.provider, model.name)
	if err == nil {
		err = s.embedAndStore(ctx, embedder, model, []models.Annotation{*a})
	}
	if err != nil {
		s.Log.Warn("annotation reply: embedding a question failed; it will be embedded on the next match",
			"annotation_id", a.ID, "error", err)
	}
}

// embedAndStore embeds the questions of batch in one call and stores the
// vectors.
func (s *Service) embedAndStore(ctx context.Context, embedder llm.Embedder, model modelKey, batch []models.Annotation) error {
	if len(batch) == 0 {
		return nil
	}
	texts := make([]string, len(batch))
	for i, a := range batch {
		texts[i] = a.Question
	}
	vecs, _, err := embedder.Embed(ctx, texts)
	if err != nil {
		return err
	}
	if len(vecs) != len(texts) {
		return fmt.Errorf("embedding model returned %d vectors for %d texts", len(vecs), len(texts))
	}
	return s.storeVectors(ctx, model, batch, vecs)
}

// storeVectors saves the vectors of batch under model. A vector is only
// kept if the annotation still exists with the question that was
// embedded: an edit made meanwhile wins, and its question is embedded
// later.
func (s *Service) storeVectors(ctx context.Context, model modelKey, batch []models.Annotation, vecs [][]float32) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for i, a := range batch {
			var current models.Annotation
			err := tx.Select("id", "question").Where("id = ?", a.ID).Take(&current).Error
			if errors.Is(err, gorm.ErrRecordNotFound) || (err == nil && current.Question != a.Question) {
				continue
			}
			if err != nil {
				return err
			}
			row := models.AnnotationEmbedding{
				AnnotationID:          a.ID,
				AppID:                 a.AppID,
				EmbeddingProviderName: model.provider,
				EmbeddingModelName:    model.name,
				Vector:                encodeVector(vecs[i]),
			}
			err = tx.Clauses(clause.OnConflict{
				Columns:   []clause.Column{{Name: "annotation_id"}, {Name: "embedding_provider_name"}, {Name: "embedding_model_name"}},
				DoUpdates: clause.AssignmentColumns([]string{"vector", "created_at"}),
			}).Create(&row).Error
			if err != nil {
				return err
			}
		}
		return nil
	})
}
