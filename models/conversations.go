package models

import (
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// WorkspaceID names the single workspace (Dify's "tenant") that everything
// in one appkb data directory belongs to.
const WorkspaceID = "7d1f9a52-2f63-4b6a-9d55-0a2f3c4e5b60"

// EndUser is the person an app call is made for, known by the `user` string
// the client sends; the same string in two apps is two end users.
type EndUser struct {
	ID             string `gorm:"primaryKey"`
	AppID          string
	ExternalUserID string
	Type           string
	Name           *string
	IsAnonymous    bool
	SessionID      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (e *EndUser) BeforeCreate(*gorm.DB) error { setID(&e.ID); return nil }

// Conversation is a chat between one end user and one app.
type Conversation struct {
	ID            string `gorm:"primaryKey"`
	AppID         string
	EndUserID     string
	Mode          string
	Name          string
	Inputs        string // JSON object
	Introduction  string
	Status        string
	DialogueCount int
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

func (c *Conversation) BeforeCreate(*gorm.DB) error { setID(&c.ID); return nil }

// Message is one query and its answer. Completion messages have no conversation.
type Message struct {
	ID                      string `gorm:"primaryKey"`
	AppID                   string
	ConversationID          *string
	EndUserID               string
	ParentMessageID         *string
	TaskID                  string
	WorkflowRunID           *string
	Query                   string
	Inputs                  string // JSON object
	Answer                  string
	MessageTokens           int
	AnswerTokens            int
	TotalTokens             int
	ProviderResponseLatency float64 // seconds
	TotalPrice              *string // decimal text; nil when unknown
	Currency                *string
	Status                  string // normal or error
	Error                   *string
	Generating              bool   // stored, answer still being written
	MessageFiles            string // JSON array
	RetrieverResources      string // JSON array
	AgentThoughts           string // JSON array
	CreatedAt               time.Time
	UpdatedAt               time.Time
	// ReplicaID is the replica writing the answer while Generating (see
	// package cluster).
	ReplicaID *string
}

func (m *Message) BeforeCreate(*gorm.DB) error { setID(&m.ID); return nil }

// MessageFeedback is an end user's rating of an answer.
type MessageFeedback struct {
	ID        string `gorm:"primaryKey"`
	AppID     string
	MessageID string
	EndUserID string
	Rating    string
	Content   *string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (f *MessageFeedback) BeforeCreate(*gorm.DB) error { setID(&f.ID); return nil }

// UploadFile is a file a client uploaded; its bytes are the blob StorageKey
// (package blobs).
type UploadFile struct {
	ID         string `gorm:"primaryKey"`
	AppID      *string
	EndUserID  *string
	Name       string
	Size       int64
	Extension  string
	MimeType   string
	StorageKey string
	Hash       string
	CreatedAt  time.Time
}

func (f *UploadFile) BeforeCreate(*gorm.DB) error { setID(&f.ID); return nil }

// ConversationVariable is the stored value of a chatflow conversation variable.
type ConversationVariable struct {
	ID             string `gorm:"primaryKey"`
	ConversationID string `gorm:"primaryKey"`
	Name           string
	ValueType      string
	Value          string // JSON
	Description    string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Annotation is a curated question and answer used for direct replies.
type Annotation struct {
	ID        string `gorm:"primaryKey"`
	AppID     string
	Question  string
	Answer    string
	HitCount  int
	Embedding []byte // little-endian float32s of the question's embedding
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (a *Annotation) BeforeCreate(*gorm.DB) error { setID(&a.ID); return nil }

func setID(id *string) {
	if *id == "" {
		*id = NewID()
	}
}

// NewID returns a new row id: a UUID of version 7, whose leading bits are
// the time. Ids made later sort after earlier ones, so rows inserted
// together land side by side in the primary-key index (a few pages written
// per commit) instead of each on a random page of it, as random (version 4)
// ids do. Clients see an ordinary UUID.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// RetrieverResource is one knowledge chunk an answer cites, as stored in
// Message.RetrieverResources (a JSON array) and sent to clients.
type RetrieverResource struct {
	ID              string  `json:"id"`
	MessageID       string  `json:"message_id"`
	Position        int     `json:"position"`
	DatasetID       string  `json:"dataset_id"`
	DatasetName     string  `json:"dataset_name"`
	DocumentID      string  `json:"document_id"`
	DocumentName    string  `json:"document_name"`
	DataSourceType  string  `json:"data_source_type"`
	SegmentID       string  `json:"segment_id"`
	Score           float64 `json:"score"`
	HitCount        int     `json:"hit_count"`
	WordCount       int     `json:"word_count"`
	SegmentPosition int     `json:"segment_position"`
	IndexNodeHash   string  `json:"index_node_hash"`
	Content         string  `json:"content"`
	Summary         *string `json:"summary"`
	CreatedAt       int64   `json:"created_at"`
}
