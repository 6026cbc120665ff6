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

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cluster"
	"appkb/internal/platform/groupcommit"
	"appkb/internal/run/workflow"
	"appkb/models"
)

// Store reads and writes versions, runs and node executions. It is safe
// for concurrent use.
type Store struct {
	db *gorm.DB
	// writeMu orders this store's writes that do not go through commits
	// (versions, forms, claims, closing interrupted runs).
	writeMu sync.Mutex
	// defs caches parsed definitions by version id, and graphs their
	// compiled graphs; a version's text never changes, so entries stay
	// valid.
	defs   sync.Map // string → *apps.Definition
	graphs sync.Map // string → *workflow.Graph
	// current remembers, by app id, the version of the definition text a
	// run last saw (see Current).
	current sync.Map // string → currentVersion
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

// currentVersion is the version of one definition text of an app.
type currentVersion struct {
	definition string
	version    Version
}

func hashText(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// Current returns the version of the app's definition as stored now,
// recording it first if no run has seen that text yet. Versions are
// therefore created lazily: an import or replace followed by no run adds
// nothing. Going back to an earlier text reuses that text's version.
//
// The version last found for an app is remembered with the text it was
// found for: while the app keeps that text, later runs take it without
// hashing the text or asking the database (version rows are never changed,
// and go only with their app).
func (s *Store) Current(ctx context.Context, app *models.App) (*Version, error) {
	if c, ok := s.current.Load(app.ID); ok && c.(currentVersion).definition == app.Definition {
		v := c.(currentVersion).version
		return &v, nil
	}
	v, err := s.current1(ctx, app)
	if err != nil {
		return nil, err
	}
	s.current.Store(app.ID, currentVersion{definition: app.Definition, version: *v})
	return v, nil
}

// current1 is Current without the memory of the last version.
func (s *Store) current1(ctx context.Context, app *models.App) (*Version, error) {
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
		return nil, apperr.FailWith(err, apperr.CodeAppUnavailable,
			"The definition of workflow %s cannot be read (%s).", v.ID, apperr.From(err).Message)
	}
	if def.Workflow == nil {
		return nil, apperr.Fail(apperr.CodeAppUnavailable, "The definition of workflow %s has no graph.", v.ID)
	}
	s.defs.Store(v.ID, def)
	out.Def = def
	return out, nil
}

// Graph returns the compiled graph of version v, compiling it on first
// use. Runs share it: the engine never changes a compiled graph.
func (s *Store) Graph(v *Version) (*workflow.Graph, error) {
	if g, ok := s.graphs.Load(v.ID); ok {
		return g.(*workflow.Graph), nil
	}
	g, err := workflow.Compile(v.Def.Workflow)
	if err != nil {
		return nil, err
	}
	s.graphs.Store(v.ID, g)
	return g, nil
}
