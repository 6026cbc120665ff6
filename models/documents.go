package models

import (
	"time"

	"gorm.io/gorm"
)

// Document is one document of a knowledge base. The indexing package owns
// its life cycle; JSON columns hold text as stored.
type Document struct {
	ID                   string `gorm:"primaryKey"`
	DatasetID            string
	Position             int
	Name                 string
	DataSourceType       string
	FileID               string
	FileName             string
	FileSize             int64
	FileExtension        string
	FileMimeType         string
	Content              *string // extracted text; nil until parsed
	ProcessRule          string  // JSON
	ProcessRuleID        string  // changes whenever ProcessRule does
	DocForm              string
	DocLanguage          string
	IndexingStatus       string
	Error                *string
	Enabled              bool
	DisabledAt           *time.Time
	DisabledBy           *string
	Archived             bool
	ArchivedAt           *time.Time
	WordCount            int
	Tokens               int
	CompletedSegments    int
	TotalSegments        int
	Batch                string
	DocMetadata          string // JSON object: field id → value
	CreatedBy            string
	CreatedAt            time.Time
	UpdatedAt            time.Time
	ProcessingStartedAt  *time.Time
	ParsingCompletedAt   *time.Time
	CleaningCompletedAt  *time.Time
	SplittingCompletedAt *time.Time
	CompletedAt          *time.Time
	PausedAt             *time.Time
	StoppedAt            *time.Time
}

func (Document) TableName() string { return "documents" }

func (d *Document) BeforeCreate(*gorm.DB) error { setID(&d.ID); return nil }

// Segment is a chunk of a document. Seq is the row id the full-text index
// refers to; ID is the public id.
type Segment struct {
	Seq           int64  `gorm:"primaryKey;autoIncrement"`
	ID            string `gorm:"uniqueIndex"`
	DatasetID     string
	DocumentID    string
	Position      int
	Content       string
	Answer        string
	WordCount     int
	Tokens        int
	Keywords      string // JSON array
	IndexNodeID   string
	IndexNodeHash string
	HitCount      int
	Enabled       bool
	DisabledAt    *time.Time
	DisabledBy    *string
	Status        string
	Error         *string
	CreatedBy     string
	UpdatedBy     *string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	IndexingAt    *time.Time
	CompletedAt   *time.Time
}

func (Segment) TableName() string { return "segments" }

func (s *Segment) BeforeCreate(*gorm.DB) error { setID(&s.ID); return nil }

// ChildChunk is a smaller piece of a parent-child document's chunk.
type ChildChunk struct {
	Seq           int64  `gorm:"primaryKey;autoIncrement"`
	ID            string `gorm:"uniqueIndex"`
	SegmentID     string
	DocumentID    string
	DatasetID     string
	Position      int
	Content       string
	WordCount     int
	IndexNodeID   string
	IndexNodeHash string
	Type          string // automatic or customized
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

func (ChildChunk) TableName() string { return "child_chunks" }

func (c *ChildChunk) BeforeCreate(*gorm.DB) error { setID(&c.ID); return nil }

// SegmentEmbedding is the vector of a chunk (ChildID nil) or of a child
// chunk under one embedding model ("provider/model").
type SegmentEmbedding struct {
	NodeID    string `gorm:"primaryKey"`
	Model     string `gorm:"primaryKey"`
	DatasetID string
	SegmentID string
	ChildID   *string
	Dims      int
	Vector    []byte // little-endian float32s
}

func (SegmentEmbedding) TableName() string { return "segment_embeddings" }

// IndexingJob is a queued or running indexing of one document.
type IndexingJob struct {
	DocumentID string `gorm:"primaryKey"`
	State      string // queued or running
	Generation int
	Attempts   int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

func (IndexingJob) TableName() string { return "indexing_jobs" }
