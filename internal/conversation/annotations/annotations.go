// Package annotations keeps an app's annotations — curated question and
// answer pairs — and the annotation reply feature: when it is switched on,
// a query whose embedding is close enough to an annotation's question is
// answered with that annotation, without calling the model.
//
// Switching the feature on or off runs as a background job (embedding every
// question can take a while with a remote model). Jobs and their state are
// kept in the database: a job that a stopped process left unfinished is
// started again when the next process starts the Service's worker (Start),
// or at its first use without one. Stop cancels the runners and waits.
package annotations

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cachever"
	"appkb/internal/platform/cluster"
	"appkb/models"
)

// MaxPageSize is the largest page a list returns; larger requests get this.
const MaxPageSize = 100

// DefaultPageSize is the page size when none is asked for.
const DefaultPageSize = 20

// Service reads and changes annotations and runs annotation reply.
type Service struct {
	db     *gorm.DB
	models *llm.Registry
	// Log receives failures of background jobs; slog.Default() unless set.
	Log *slog.Logger
	// Replica, when set before Start, stamps the jobs this process runs
	// and, on a shared database, makes Start take over the jobs of dead
	// replicas (see Resume). Nil: the process is alone on its database.
	Replica *cluster.Replica
	jobs    *jobRunner
	// settings caches Settings by app id, checked against the
	// annotation_settings counter of cache_versions (migration 0018).
	settings *cachever.Cache[string, models.AnnotationReplySetting]
}

// NewService returns a service over db that embeds with the models of
// registry (nil: the builtin models only).
func NewService(db *gorm.DB, registry *llm.Registry) *Service {
	return &Service{db: db, models: registry, Log: slog.Default(), jobs: &jobRunner{},
		settings: cachever.New[string, models.AnnotationReplySetting](db, "annotation_settings")}
}

// Page is one page of a list of annotations.
type Page struct {
	Items   []models.Annotation
	Total   int64
	Page    int
	Limit   int
	HasMore bool
}

// List returns one page (1-based) of appID's annotations, newest first,
// keeping only those whose question or answer contains keyword (case is
// ignored for ASCII letters) when it is not empty. A limit below 1 means
// DefaultPageSize and one above MaxPageSize means MaxPageSize.
func (s *Service) List(ctx context.Context, appID string, page, limit int, keyword string) (*Page, error) {
	if page < 1 {
		page = 1
	}
	switch {
	case limit < 1:
		limit = DefaultPageSize
	case limit > MaxPageSize:
		limit = MaxPageSize
	}
	q := s.db.WithContext(ctx).Model(&models.Annotation{}).Where("app_id = ?", appID)
	if kw := strings.TrimSpace(keyword); kw != "" {
		pattern := "%" + db.EscapeLike(kw) + "%"
		q = q.Where(`(`+db.ContainsCI(s.db, "question")+` OR `+db.ContainsCI(s.db, "answer")+`)`, pattern, pattern)
	}
	out := &Page{Page: page, Limit: limit, Items: []models.Annotation{}}
	if err := q.Count(&out.Total).Error; err != nil {
		return nil, err
	}
	err := q.Omit("embedding").Order("created_at DESC, id DESC").
		Offset((page - 1) * limit).Limit(limit).Find(&out.Items).Error
	if err != nil {
		return nil, err
	}
	out.HasMore = int64(page)*int64(limit) < out.Total
	return out, nil
}

// escapeLike makes a text match itself literally in a LIKE pattern that
// uses \ as its escape character.

// Create stores a new annotation for appID. When annotation reply is on,
// its question is embedded right away; should that fail, it is embedded
// the first time a query is matched.
func (s *Service) Create(ctx context.Context, appID, question, answer string) (*models.Annotation, error) {
	question, answer, err := checkPair(question, answer)
	if err != nil {
		return nil, err
	}
	a := &models.Annotation{AppID: appID, Question: question, Answer: answer}
	if err := s.db.WithContext(ctx).Omit("embedding").Create(a).Error; err != nil {
		return nil, err
	}
	s.embedNow(ctx, a)
	return a, nil
}

// Update replaces the question and answer of one of appID's annotations;
// an unknown id gives 404 not_found.
func (s *Service) Update(ctx context.Context, appID, id, question, answer string) (*models.Annotation, error) {
	question, answer, err := checkPair(question, answer)
	if err != nil {
		return nil, err
	}
	var a models.Annotation
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Omit("embedding").Where("app_id = ? AND id = ?", appID, id).Take(&a).Error; err != nil {
			return err
		}
		changed := a.Question != question
		a.Question, a.Answer = question, answer
		if err := tx.Model(&a).Select("question", "answer", "updated_at").Updates(&a).Error; err != nil {
			return err
		}
		if changed {
			return tx.Where("annotation_id = ?", a.ID).Delete(&models.AnnotationEmbedding{}).Error
		}
		return nil
	})
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, notFound()
	}
	if err != nil {
		return nil, err
	}
	s.embedNow(ctx, &a)
	return &a, nil
}

// Delete removes one of appID's annotations with its vectors and hit
// history; an unknown id gives 404 not_found.
func (s *Service) Delete(ctx context.Context, appID, id string) error {
	res := s.db.WithContext(ctx).Where("app_id = ? AND id = ?", appID, id).Delete(&models.Annotation{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return notFound()
	}
	return nil
}

// HitHistory returns the recorded replies of one annotation, newest first.
func (s *Service) HitHistory(ctx context.Context, appID, annotationID string) ([]models.AnnotationHitHistory, error) {
	var out []models.AnnotationHitHistory
	err := s.db.WithContext(ctx).Where("app_id = ? AND annotation_id = ?", appID, annotationID).
		Order("created_at DESC, id DESC").Find(&out).Error
	return out, err
}

func checkPair(question, answer string) (string, string, error) {
	if strings.TrimSpace(question) == "" {
		return "", "", apperr.InvalidParam("question must not be empty")
	}
	if strings.TrimSpace(answer) == "" {
		return "", "", apperr.InvalidParam("answer must not be empty")
	}
	return question, answer, nil
}

func notFound() *apperr.Error {
	return apperr.NotFound("Annotation not found.")
}
