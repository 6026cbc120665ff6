package models

import (
	"time"

	"gorm.io/gorm"
)

// AnnotationReplySetting says whether an app answers matching queries from
// its annotations, and with which embedding model and threshold.
type AnnotationReplySetting struct {
	AppID                 string `gorm:"primaryKey"`
	Enabled               bool
	EmbeddingProviderName string
	EmbeddingModelName    string
	ScoreThreshold        float64
	CreatedAt             time.Time
	UpdatedAt             time.Time
}

// States of an annotation reply job.
const (
	JobWaiting    = "waiting"
	JobProcessing = "processing"
	JobCompleted  = "completed"
	JobError      = "error"
)

// AnnotationReplyJob is one request to switch annotation reply on
// (Action "enable") or off ("disable").
type AnnotationReplyJob struct {
	ID                    string `gorm:"primaryKey"`
	AppID                 string
	Action                string
	Status                string
	ErrorMsg              string
	EmbeddingProviderName string
	EmbeddingModelName    string
	ScoreThreshold        float64
	// Attempts counts how often a runner has started the job.
	Attempts  int
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (j *AnnotationReplyJob) BeforeCreate(*gorm.DB) error { setID(&j.ID); return nil }

// AnnotationEmbedding is an annotation question's vector under one
// embedding model: little-endian float32s of unit length.
type AnnotationEmbedding struct {
	AnnotationID          string `gorm:"primaryKey"`
	AppID                 string
	EmbeddingProviderName string `gorm:"primaryKey"`
	EmbeddingModelName    string `gorm:"primaryKey"`
	Vector                []byte
	CreatedAt             time.Time
}

// AnnotationHitHistory records a query that was answered from an
// annotation, with the annotation as it read at that moment.
type AnnotationHitHistory struct {
	ID                 string `gorm:"primaryKey"`
	AppID              string
	AnnotationID       string
	Query              string
	Score              float64
	AnnotationQuestion string
	AnnotationAnswer   string
	CreatedAt          time.Time
}

func (h *AnnotationHitHistory) BeforeCreate(*gorm.DB) error { setID(&h.ID); return nil }
