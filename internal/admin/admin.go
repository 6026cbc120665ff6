// Package admin holds what the admin API does for a test that drives appkb
// as a stand-in for Dify: apps imported from DSL files, keys made and
// revoked, knowledge bases made with their documents, and all data reset.
// It knows nothing of HTTP; handlers/admin.go serves it.
package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"gorm.io/gorm"

	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/blobs"
	"appkb/models"
)

// Service does the admin operations.
type Service struct {
	db       *gorm.DB
	apps     *apps.Store
	keys     *apikeys.Store
	datasets *datasets.Store
	docs     *documents.Service
	// files holds the bytes of uploads, which Reset removes with their rows.
	files blobs.Store
}

// New builds the service over the stores the server already has; files is
// where uploads keep their bytes (blobs.For of the server's database and
// data directory).
func New(db *gorm.DB, appStore *apps.Store, keys *apikeys.Store, ds *datasets.Store, docs *documents.Service, files blobs.Store) *Service {
	return &Service{db: db, apps: appStore, keys: keys, datasets: ds, docs: docs, files: files}
}

// App is an imported app; APIKey is set when a key was made with it.
type App struct {
	ID     string `json:"app_id"`
	Name   string `json:"name"`
	Mode   string `json:"mode"`
	APIKey string `json:"api_key,omitempty"`
}

func view(a *models.App) App { return App{ID: a.ID, Name: a.Name, Mode: a.Mode} }

// ImportApp stores an app from its DSL text and makes a key for it.
func (s *Service) ImportApp(ctx context.Context, dsl []byte) (*App, error) {
	a, err := s.apps.Import(ctx, dsl)
	if err != nil {
		return nil, err
	}
	key, err := s.keys.CreateAppKey(ctx, a.ID, "admin")
	if err != nil {
		return nil, err
	}
	v := view(a)
	v.APIKey = key
	return &v, nil
}

// ReplaceApp puts a new definition in place of an app's; its id, keys and
// conversations stay.
func (s *Service) ReplaceApp(ctx context.Context, id string, dsl []byte) (*App, error) {
	a, err := s.apps.Replace(ctx, id, dsl)
	if err != nil {
		return nil, err
	}
	v := view(a)
	return &v, nil
}

// ListApps answers every app, oldest first.
func (s *Service) ListApps(ctx context.Context) ([]App, error) {
	rows, err := s.apps.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]App, 0, len(rows))
	for i := range rows {
		out = append(out, view(&rows[i]))
	}
	return out, nil
}

// DeleteApp removes an app with everything that belongs to it (keys,
// conversations, messages, runs: the foreign keys cascade).
func (s *Service) DeleteApp(ctx context.Context, id string) error {
	res := s.db.WithContext(ctx).Delete(&models.App{}, "id = ?", id)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return apperr.NotFound("App %s not found.", id)
	}
	return nil
}

// CreateAppKey makes another key for an app.
func (s *Service) CreateAppKey(ctx context.Context, appID string) (string, error) {
	return s.keys.CreateAppKey(ctx, appID, "admin")
}

// CreateKnowledgeKey makes a knowledge key, limited to datasetIDs when any
// are given. Every id must name a knowledge base.
func (s *Service) CreateKnowledgeKey(ctx context.Context, datasetIDs []string) (string, error) {
	for _, id := range datasetIDs {
		if _, err := s.datasets.FindDataset(ctx, datasets.Actor{}, id); err != nil {
			return "", err
		}
	}
	return s.keys.CreateKnowledgeKey(ctx, datasetIDs, "admin")
}

// RevokeKey disables a key, named by its text or its shown prefix.
func (s *Service) RevokeKey(ctx context.Context, key string) (string, error) {
	return s.keys.Revoke(ctx, key)
}

// Doc is a document given as text, or as a file to parse (File set).
type Doc struct {
	Name string    `json:"name"`
	Text string    `json:"text"`
	File io.Reader `json:"-"`
}

// KnowledgeBase is a knowledge base made by CreateKnowledgeBase.
type KnowledgeBase struct {
	ID          string   `json:"dataset_id"`
	Name        string   `json:"name"`
	DocumentIDs []string `json:"document_ids"`
	Batches     []string `json:"batches"`
	APIKey      string   `json:"api_key"`
}

// MaxDocs bounds the documents of one CreateKnowledgeBase call.
const MaxDocs = 1000

// CreateKnowledgeBase makes a knowledge base (high-quality indexing with
// the default embedding model unless technique says otherwise), queues its
// documents for indexing and makes a knowledge key scoped to it. Documents
// are indexed in the background as any upload is; their batches say how
// far they are.
func (s *Service) CreateKnowledgeBase(ctx context.Context, name, technique string, docs []Doc) (*KnowledgeBase, error) {
	if len(docs) > MaxDocs {
		return nil, apperr.InvalidParam("at most %d documents at once", MaxDocs)
	}
	if technique == "" {
		technique = datasets.TechniqueHighQuality
	}
	d, err := s.datasets.CreateDataset(ctx, datasets.Actor{}, datasets.CreateParams{Name: name, IndexingTechnique: &technique})
	if err != nil {
		return nil, err
	}
	kb := &KnowledgeBase{ID: d.ID, Name: d.Name, DocumentIDs: []string{}, Batches: []string{}}
	for i, doc := range docs {
		if doc.Name == "" {
			doc.Name = fmt.Sprintf("document-%d.txt", i+1)
		}
		st := documents.Settings{IndexingTechnique: &technique}
		var c *documents.Created
		if doc.File != nil {
			c, err = s.docs.CreateFromFile(ctx, datasets.Actor{}, d.ID, documents.Upload{Name: doc.Name, Body: doc.File}, st)
		} else {
			c, err = s.docs.CreateFromText(ctx, datasets.Actor{}, d.ID, doc.Name, doc.Text, st)
		}
		if err != nil {
			// Leave nothing half made behind.
			if derr := s.datasets.DeleteDataset(context.WithoutCancel(ctx), datasets.Actor{}, d.ID); derr != nil {
				slog.Warn("admin: removing a half-made knowledge base failed", "dataset", d.ID, "error", derr)
			}
			return nil, fmt.Errorf("documents[%d]: %w", i, err)
		}
		kb.DocumentIDs = append(kb.DocumentIDs, c.Document.ID)
		kb.Batches = append(kb.Batches, c.Batch)
	}
	if kb.APIKey, err = s.keys.CreateKnowledgeKey(ctx, []string{d.ID}, "admin"); err != nil {
		return nil, err
	}
	return kb, nil
}

// Reset removes every app, knowledge base, key, end user and upload (its
// bytes too), as on a fresh data directory. Knowledge bases go through their own deletion,
// which also drops what they keep outside their rows.
func (s *Service) Reset(ctx context.Context) error {
	var ids []string
	if err := s.db.WithContext(ctx).Model(&models.Dataset{}).Pluck("id", &ids).Error; err != nil {
		return err
	}
	for _, id := range ids {
		if err := s.datasets.DeleteDataset(ctx, datasets.Actor{}, id); err != nil && !apperr.Is(err, apperr.CodeNotFound) {
			return err
		}
	}
	var uploads []string
	if err := s.db.WithContext(ctx).Model(&models.UploadFile{}).Pluck("storage_key", &uploads).Error; err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	// Children before parents, for the tables no cascade reaches.
	for _, m := range []any{&models.App{}, &models.APIKey{}, &models.EndUser{}, &models.UploadFile{}, &models.DatasetTag{}} {
		if err := s.db.WithContext(ctx).Session(&gorm.Session{AllowGlobalUpdate: true}).Delete(m).Error; err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	// The bytes of the uploads go once no row points at them.
	if s.files != nil {
		for _, key := range uploads {
			if key == "" {
				continue
			}
			if err := s.files.Delete(ctx, key); err != nil {
				return fmt.Errorf("reset: removing an upload's bytes: %w", err)
			}
		}
	}
	return nil
}

// ErrDisabled is answered when the server has no admin token.
var ErrDisabled = errors.New("the admin API is off: start the server with --admin-token")
