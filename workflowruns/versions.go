// Package workflowruns keeps the history of workflow and chatflow runs: the
// versions of an app's graph, each run with its node executions (it
// implements workflow.RunStore over the database), and the queries behind
// run detail and run logs. It has no HTTP in it.
package workflowruns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"appkb/apperr"
	"appkb/apps"
	"appkb/cluster"
	"appkb/groupcommit"
	"appkb/models"
)

// Store reads and writes versions, runs and node executions. It is safe
// for concurrent use.
type Store struct {
	db *gorm.DB
	// writeMu queues this store's writes: SQLite has one writer, and
	// waiting here is cheaper than its busy handler.
	writeMu sync.Mutex
	// defs caches parsed definitions by version id; a version's text never
	// changes, so entries stay valid.
	defs sync.Map // string → *apps.Definition
	// replica owns the runs this store starts (see SetReplica).
	replica *cluster.Replica
	// commits batches the rows of runs and node executions with the other
	// writes that share it (see ShareCommits).
	commits *groupcommit.Queue
}

// New returns a Store over db.
func New(db *gorm.DB) *Store { return &Store{db: db, commits: groupcommit.New(db)} }

// ShareCommits makes the store write runs and node executions through q,
// in the batches of every other writer that uses it (chat answers), so
// that concurrent requests of all kinds share commits. Call it before the
// store records any run.
func (s *Store) ShareCommits(q *groupcommit.Queue) { s.commits = q }

// Version is a workflow version with its parsed definition.
type Version struct {
	ID      string
	AppID   string
	Label   string
	Def     *apps.Definition
	Created time.Time
}

func hashText(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// Current returns the version of the app's definition as stored now,
// recording it first if no run has seen that text yet. Versions are
// therefore created lazily: an import or replace followed by no run adds
// nothing. Going back to an earlier text reuses that text's version.
func (s *Store) Current(ctx context.Context, app *models.App) (*Version, error) {
	hash := hashText(app.Definition)
	var v models.WorkflowVersion
	err := s.db.WithContext(ctx).Where("app_id = ? AND definition_hash = ?", app.ID, hash).Take(&v).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		now := time.Now().UTC()
		v = models.WorkflowVersion{AppID: app.ID, DefinitionHash: hash, Definition: app.Definition,
			Version: now.Format("2006-01-02 15:04:05.000000"), CreatedAt: now}
		s.writeMu.Lock()
		err = s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&v).Error
		s.writeMu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("record workflow version: %w", err)
		}
		// A concurrent first run may have won the insert; read the row
		// that is there.
		v = models.WorkflowVersion{}
		err = s.db.WithContext(ctx).Where("app_id = ? AND definition_hash = ?", app.ID, hash).Take(&v).Error
	}
	if err != nil {
		return nil, err
	}
	return s.version(&v)
}

// ByID returns a version of appID. A version that does not exist or
// belongs to another app is not_found.
func (s *Store) ByID(ctx context.Context, appID, id string) (*Version, error) {
	var v models.WorkflowVersion
	err := s.db.WithContext(ctx).Where("id = ? AND app_id = ?", id, appID).Take(&v).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.NotFound("Workflow %s not found.", id)
	}
	if err != nil {
		return nil, err
	}
	return s.version(&v)
}

func (s *Store) version(v *models.WorkflowVersion) (*Version, error) {
	out := &Version{ID: v.ID, AppID: v.AppID, Label: v.Version, Created: v.CreatedAt}
	if d, ok := s.defs.Load(v.ID); ok {
		out.Def = d.(*apps.Definition)
		return out, nil
	}
	def, err := apps.Parse([]byte(v.Definition))
	if err != nil {
		return nil, apperr.Wrap(err, 400, apperr.CodeAppUnavailable,
			"The definition of workflow %s cannot be read (%s).", v.ID, apperr.From(err).Message)
	}
	if def.Workflow == nil {
		return nil, apperr.New(400, apperr.CodeAppUnavailable, "The definition of workflow %s has no graph.", v.ID)
	}
	s.defs.Store(v.ID, def)
	out.Def = def
	return out, nil
}
