package models

import "time"

// DatasetPipeline is the knowledge pipeline a knowledge base runs in
// place of its built-in one: a Dify export (kind: rag_pipeline), as
// imported.
type DatasetPipeline struct {
	DatasetID string `gorm:"primaryKey"`
	Name      string
	DSL       string `gorm:"column:dsl"`
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (DatasetPipeline) TableName() string { return "dataset_pipelines" }
