package workflow

import "context"

// RunStore persists runs and node executions. The engine calls it, when
// one is set, just before it emits workflow_started, node_finished and
// workflow_finished (or workflow_paused), so that what an event announces
// is already stored; a failing store fails the run.
// Storage is not part of this package: the handlers' layer provides an
// implementation over the database.
type RunStore interface {
	// RunStarted records a new run (status "running").
	RunStarted(ctx context.Context, run *RunRecord) error
	// RunResumed records that a paused run is running again.
	RunResumed(ctx context.Context, run *RunRecord) error
	// NodeFinished records one finished node execution.
	NodeFinished(ctx context.Context, exec *NodeFinishedData, runID string) error
	// RunFinished records the outcome of a run, including the final
	// conversation variables to keep for the next turn of a chatflow. A
	// paused run ends here too, with status RunPaused and the snapshot to
	// resume from.
	RunFinished(ctx context.Context, run *RunRecord, result *Result) error
}

// RunRecord describes a run for storage.
type RunRecord struct {
	ID             string
	TaskID         string
	WorkflowID     string
	AppID          string
	UserID         string
	ConversationID string
	MessageID      string
	Inputs         map[string]any
	CreatedAt      int64
}
