// Package apps imports app definition files (Dify's DSL export format) and
// reads the stored apps back.
package apps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"
	"gorm.io/gorm"

	"appkb/apperr"
	"appkb/models"
)

// Modes lists the app modes an app definition may declare.
var Modes = []string{"completion", "chat", "agent-chat", "advanced-chat", "workflow", "agent"}

// MaxDefinitionSize bounds an app definition file, as Dify does.
const MaxDefinitionSize = 10 << 20

// Definition is the part of an app definition file that this package reads.
// The file itself is stored unchanged, so nothing else in it is lost.
type Definition struct {
	Version string `yaml:"version"`
	Kind    string `yaml:"kind"`
	App     *struct {
		Name           string `yaml:"name"`
		Mode           string `yaml:"mode"`
		Description    string `yaml:"description"`
		Icon           string `yaml:"icon"`
		IconType       string `yaml:"icon_type"`
		IconBackground string `yaml:"icon_background"`
	} `yaml:"app"`
}

// Parse checks that data is an app definition and returns its envelope.
func Parse(data []byte) (*Definition, error) {
	if len(data) > MaxDefinitionSize {
		return nil, apperr.InvalidParam("app definition is larger than %d bytes", MaxDefinitionSize)
	}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		return nil, apperr.InvalidParam("app definition is not valid YAML: %v", err)
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, apperr.InvalidParam("app definition must be a YAML mapping at the top level")
	}
	var def Definition
	if err := root.Decode(&def); err != nil {
		return nil, apperr.InvalidParam("app definition has an unexpected shape: %v", err)
	}
	if def.App == nil {
		return nil, apperr.InvalidParam("app definition has no `app` section")
	}
	if def.App.Mode == "" {
		return nil, apperr.InvalidParam("app definition has no `app.mode`")
	}
	if !slices.Contains(Modes, def.App.Mode) {
		return nil, apperr.InvalidParam("app.mode %q is not one of %v", def.App.Mode, Modes)
	}
	if def.App.Name == "" {
		return nil, apperr.InvalidParam("app definition has no `app.name`")
	}
	return &def, nil
}

// Store reads and writes apps.
type Store struct{ db *gorm.DB }

func NewStore(db *gorm.DB) *Store { return &Store{db: db} }

// Import stores a new app from an app definition file.
func (s *Store) Import(ctx context.Context, data []byte) (*models.App, error) {
	def, err := Parse(data)
	if err != nil {
		return nil, err
	}
	app := &models.App{
		Name:           def.App.Name,
		Mode:           def.App.Mode,
		Description:    def.App.Description,
		Icon:           def.App.Icon,
		IconType:       def.App.IconType,
		IconBackground: def.App.IconBackground,
		Definition:     string(data),
	}
	if err := s.db.WithContext(ctx).Create(app).Error; err != nil {
		return nil, fmt.Errorf("store app: %w", err)
	}
	return app, nil
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
