// Package models holds the GORM structs that map appkb's tables. It has no
// behaviour beyond id and timestamp defaults.
package models

import (
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// App is one imported application. Definition keeps the app definition file
// exactly as it was imported.
type App struct {
	ID             string `gorm:"primaryKey"`
	Name           string
	Mode           string
	Description    string
	IconType       string
	Icon           string
	IconBackground string
	Definition     string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (a *App) BeforeCreate(*gorm.DB) error {
	if a.ID == "" {
		a.ID = uuid.NewString()
	}
	return nil
}

// Key kinds.
const (
	KeyKindApp       = "app"
	KeyKindKnowledge = "knowledge"
)

// APIKey is a bearer key, stored as the SHA-256 of its text. Prefix is the
// start of the key, kept so that people can tell their keys apart.
type APIKey struct {
	ID        string `gorm:"primaryKey"`
	Kind      string
	Prefix    string
	Hash      string
	AppID     *string
	Label     string
	CreatedAt time.Time
	RevokedAt *time.Time
	Datasets  []APIKeyDataset `gorm:"foreignKey:APIKeyID"`
}

func (APIKey) TableName() string { return "api_keys" }

func (k *APIKey) BeforeCreate(*gorm.DB) error {
	if k.ID == "" {
		k.ID = uuid.NewString()
	}
	return nil
}

// APIKeyDataset limits a knowledge key to one knowledge base.
type APIKeyDataset struct {
	APIKeyID  string `gorm:"primaryKey;column:api_key_id"`
	DatasetID string `gorm:"primaryKey"`
}

func (APIKeyDataset) TableName() string { return "api_key_datasets" }
