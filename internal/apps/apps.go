// Package apps reads app definition files (Dify's DSL export format, plain
// or wrapped in an .ifpkg package), stores the apps they define, and works
// out what the app-information operations report about an app.
//
// An app is stored with its definition text exactly as imported; Parse turns
// that text into a Definition, whose typed parts are what the rest of appkb
// runs on.
package apps

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gorm.io/gorm"

	"appkb/internal/platform/apperr"
	"appkb/internal/platform/cachever"
	"appkb/models"
)

// Store reads and writes apps.
type Store struct {
	db *gorm.DB
	// cache holds apps read by Cached; any change to the apps table,
	// here or in another process, empties it before it is trusted again.
	cache *cachever.Cache[string, *models.App]
	// parsed holds the definition parsed from each cached app row, by app
	// id (see Load).
	parsed sync.Map // string -> parsedDef
	// Check, when set, vets a parsed definition before Import or Replace
	// stores it (the workflow engine compiles the graph), so that an app
	// that could never run is refused up front.
	Check func(*Definition) error
}

// parsedDef is a definition with the cached row it was parsed from.
type parsedDef struct {
	app *models.App
	def *Definition
}

func NewStore(db *gorm.DB) *Store {
	return &Store{db: db, cache: cachever.New[string, *models.App](db, "apps")}
}

// loadChecked reads an app definition file as Import and Replace take it
// and runs the store's Check on it when there is one.
func (s *Store) loadChecked(data []byte) ([]byte, *Definition, error) {
	text, def, err := load(data)
	if err != nil {
		return nil, nil, err
	}
	if s.Check != nil {
		if err := s.Check(def); err != nil {
			return nil, nil, err
		}
	}
	return text, def, nil
}

// Import stores a new app from an app definition file (YAML text or an app
// package). A file that does not parse creates nothing.
func (s *Store) Import(ctx context.Context, data []byte) (*models.App, error) {
	text, def, err := s.loadChecked(data)
	if err != nil {
		return nil, err
	}
	app := &models.App{}
	fill(app, def, text)
	if err := s.db.WithContext(ctx).Create(app).Error; err != nil {
		return nil, fmt.Errorf("store app: %w", err)
	}
	return app, nil
}

// Replace updates an app in place from a new definition file. The app keeps
// its id, so its API keys, conversations and messages stay with it. The new
// file must define an app of the same mode (chat and agent-chat count as
// one, since switching the agent loop on turns one into the other). When
// anything is wrong nothing changes.
func (s *Store) Replace(ctx context.Context, appID string, data []byte) (*models.App, error) {
	text, def, err := s.loadChecked(data)
	if err != nil {
		return nil, err
	}
	var app models.App
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Take(&app, "id = ?", appID).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return apperr.NotFound("app %s does not exist", appID)
		}
		if err != nil {
			return err
		}
		if !sameFamily(app.Mode, def.App.Mode) {
			return apperr.InvalidParam("app %s is a %s app and the file defines a %s app; import it as a new app instead",
				appID, app.Mode, def.App.Mode)
		}
		fill(&app, def, text)
		return tx.Save(&app).Error
	})
	if err != nil {
		return nil, err
	}
	return &app, nil
}

// Export returns the app's definition text, as imported (for a package, the
// definition file it held). Importing it again gives an equal Definition.
func (s *Store) Export(ctx context.Context, appID string) ([]byte, error) {
	app, err := s.Get(ctx, appID)
	if err != nil {
		return nil, err
	}
	return []byte(app.Definition), nil
}

// Get returns one app.
func (s *Store) Get(ctx context.Context, id string) (*models.App, error) {
	var app models.App
	err := s.db.WithContext(ctx).Take(&app, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.NotFound("app %s does not exist", id)
	}
	if err != nil {
		return nil, err
	}
	return &app, nil
}

// Cached is Get for hot paths: while no app has changed since this store
// last read it, the app comes from memory. The returned app is shared and
// must not be modified; while it is current, every call returns the same
// pointer, so callers may key their own derived data on it.
func (s *Store) Cached(ctx context.Context, id string) (*models.App, error) {
	app, ok, err := s.cache.Get(ctx, id, func(ctx context.Context) (*models.App, bool, error) {
		app, err := s.Get(ctx, id)
		if err != nil && apperr.Is(err, apperr.CodeNotFound) {
			return nil, false, nil
		}
		return app, err == nil, err
	})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apperr.NotFound("app %s does not exist", id)
	}
	return app, nil
}

// Load returns one app with its parsed definition; a stored definition that
// no longer parses makes the app unavailable (400 app_unavailable). The app
// comes from Cached and its definition is parsed once per cached row, not
// on every call: both are shared and must not be modified.
func (s *Store) Load(ctx context.Context, id string) (*models.App, *Definition, error) {
	app, err := s.Cached(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	def, err := s.DefinitionOf(app)
	if err != nil {
		return nil, nil, err
	}
	return app, def, nil
}

// DefinitionOf is the parsed definition of an app row the caller already
// loaded through Cached, parsed once per cached row as Load does; it spares
// a second cache lookup when the row is at hand.
func (s *Store) DefinitionOf(app *models.App) (*Definition, error) {
	if v, ok := s.parsed.Load(app.ID); ok {
		if p := v.(parsedDef); p.app == app {
			return p.def, nil
		}
	}
	def, err := parseStored(app)
	if err != nil {
		return nil, err
	}
	s.parsed.Store(app.ID, parsedDef{app: app, def: def})
	return def, nil
}

// parseStored parses an app's stored definition.
func parseStored(app *models.App) (*Definition, error) {
	def, err := parseText([]byte(app.Definition))
	if err != nil {
		return nil, apperr.FailWith(err, apperr.CodeAppUnavailable,
			"the stored definition of app %s cannot be read (%s); import it again", app.ID, apperr.From(err).Message)
	}
	return def, nil
}

// List returns every app, oldest first.
func (s *Store) List(ctx context.Context) ([]models.App, error) {
	var out []models.App
	err := s.db.WithContext(ctx).Order("created_at, id").Find(&out).Error
	return out, err
}

// FindByName returns the first app with this name, or nil.
func (s *Store) FindByName(ctx context.Context, name string) (*models.App, error) {
	var out []models.App
	if err := s.db.WithContext(ctx).Where("name = ?", name).Order("created_at").Limit(1).Find(&out).Error; err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &out[0], nil
}

// fill copies what the apps table keeps from a parsed definition.
func fill(app *models.App, def *Definition, text []byte) {
	app.Name = def.App.Name
	app.Mode = def.App.Mode
	app.Description = def.App.Description
	app.Icon = def.App.Icon
	app.IconType = def.App.IconType
	app.IconBackground = def.App.IconBackground
	app.Definition = string(text)
}

// sameFamily reports whether an app of mode a may be replaced by one of mode b.
func sameFamily(a, b string) bool {
	conversational := func(m string) bool { return m == ModeChat || m == ModeAgentChat }
	return a == b || (conversational(a) && conversational(b))
}
