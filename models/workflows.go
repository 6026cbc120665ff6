package models

import (
	"time"

	"gorm.io/gorm"
)

// WorkflowVersion is one definition text of a workflow or chatflow app;
// its id is the workflow_id that runs report and that
// POST /workflows/{workflow_id}/run names.
type WorkflowVersion struct {
	ID             string `gorm:"primaryKey"`
	AppID          string
	DefinitionHash string // hex SHA-256 of Definition
	Definition     string
	// Version is the label logs show for it (when it was first seen).
	Version   string
	CreatedAt time.Time
}

func (v *WorkflowVersion) BeforeCreate(*gorm.DB) error { setID(&v.ID); return nil }

// WorkflowRun is one execution of a workflow version.
type WorkflowRun struct {
	ID              string `gorm:"primaryKey"`
	AppID           string
	WorkflowID      string
	TaskID          string
	EndUserID       *string
	TriggeredFrom   string
	CreatedFrom     string
	ConversationID  *string
	MessageID       *string
	Status          string
	Inputs          string  // JSON object
	Outputs         *string // JSON object; nil until the run has ended
	Error           *string
	ElapsedTime     float64 // seconds
	TotalTokens     int
	TotalSteps      int
	ExceptionsCount int
	CreatedAt       time.Time
	FinishedAt      *time.Time
	// PauseState is the JSON snapshot a paused run resumes from.
	PauseState *string
	// ReplicaID is the replica that started or last resumed the run (see
	// package cluster).
	ReplicaID *string
}

func (r *WorkflowRun) BeforeCreate(*gorm.DB) error { setID(&r.ID); return nil }

// WorkflowNodeExecution is one finished node of a run.
type WorkflowNodeExecution struct {
	ID                string `gorm:"primaryKey"`
	WorkflowRunID     string
	NodeID            string
	NodeType          string
	Title             string
	NodeIndex         int
	PredecessorNodeID *string
	Inputs            string  // JSON object
	ProcessData       *string // JSON object
	Outputs           *string // JSON object
	Status            string
	Error             *string
	ElapsedTime       float64 // seconds
	ExecutionMetadata string  // JSON object
	CreatedAt         time.Time
	FinishedAt        *time.Time
}

func (e *WorkflowNodeExecution) BeforeCreate(*gorm.DB) error { setID(&e.ID); return nil }

// HumanInputForm is the form a paused run waits on at one human-input
// node.
type HumanInputForm struct {
	ID            string `gorm:"primaryKey"`
	Token         string
	AppID         string
	WorkflowRunID string
	NodeID        string
	Definition    string // JSON of workflow.HumanForm, without the answer
	Status        string
	ActionID      *string
	SubmittedData *string // JSON object
	SubmittedBy   *string
	ExpiresAt     time.Time
	CreatedAt     time.Time
	SubmittedAt   *time.Time
}
