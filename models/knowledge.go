package models

import (
	"time"

	"gorm.io/gorm"
)

// Dataset is a knowledge base. JSON columns hold text as stored; the
// knowledge package reads and writes them.
type Dataset struct {
	ID                     string `gorm:"primaryKey"`
	Name                   string
	Description            string
	Provider               string
	Permission             string
	PartialMembers         string  // JSON array of account ids
	IndexingTechnique      *string // nil until chosen
	EmbeddingModel         string
	EmbeddingModelProvider string
	RetrievalModel         *string // JSON; nil means the defaults
	SummaryIndexSetting    *string // JSON; nil when never given
	DocForm                *string // nil while there are no documents
	DataSourceType         *string // nil while there are no documents
	BuiltInFieldEnabled    bool
	CreatedBy              string
	UpdatedBy              string
	CreatedAt              time.Time
	UpdatedAt              time.Time
}

func (Dataset) TableName() string { return "datasets" }

func (d *Dataset) BeforeCreate(*gorm.DB) error { setID(&d.ID); return nil }

// DatasetTag is a workspace tag for grouping knowledge bases.
type DatasetTag struct {
	ID        string `gorm:"primaryKey"`
	Name      string
	CreatedBy string
	CreatedAt time.Time
}

func (DatasetTag) TableName() string { return "dataset_tags" }

func (t *DatasetTag) BeforeCreate(*gorm.DB) error { setID(&t.ID); return nil }

// DatasetTagBinding attaches one tag to one knowledge base.
type DatasetTagBinding struct {
	TagID     string `gorm:"primaryKey"`
	DatasetID string `gorm:"primaryKey"`
	CreatedAt time.Time
}

func (DatasetTagBinding) TableName() string { return "dataset_tag_bindings" }

// DatasetMetadataField is a custom metadata field of one knowledge base.
type DatasetMetadataField struct {
	ID        string `gorm:"primaryKey"`
	DatasetID string
	Name      string
	Type      string // string, number or time
	CreatedBy string
	UpdatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (DatasetMetadataField) TableName() string { return "dataset_metadata_fields" }

func (f *DatasetMetadataField) BeforeCreate(*gorm.DB) error { setID(&f.ID); return nil }
