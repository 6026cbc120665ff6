package workflow

// Event names as they appear in the "event" field of a stream frame.
const (
	EventWorkflowStarted  = "workflow_started"
	EventNodeStarted      = "node_started"
	EventNodeFinished     = "node_finished"
	EventNodeRetry        = "node_retry"
	EventTextChunk        = "text_chunk"
	EventWorkflowFinished = "workflow_finished"
)

// Node execution states reported in node_finished and node_retry.
const (
	NodeSucceeded = "succeeded"
	NodeFailed    = "failed"
	// NodeException is a failure handled by the node's error strategy; the
	// run goes on.
	NodeException = "exception"
	NodeRetrying  = "retry"
)

// Run states reported in workflow_finished.
const (
	RunSucceeded        = "succeeded"
	RunFailed           = "failed"
	RunStopped          = "stopped"
	RunPartialSucceeded = "partial-succeeded"
)

// Event is one stream event. Every event marshals to the JSON of one frame
// payload: {"event", "task_id", "workflow_run_id", "data", …}. For a
// chatflow the engine also fills message_id, conversation_id and
// created_at from RunInput, so the same value serves the chat stream
// (the StreamEvent* schemas) and the workflow stream
// (WorkflowStreamEvent*), where those fields are left out.
type Event interface {
	// Name is the value of the "event" field.
	Name() string
}

// Envelope holds the fields every event carries next to its data.
type Envelope struct {
	Event          string `json:"event"`
	TaskID         string `json:"task_id"`
	WorkflowRunID  string `json:"workflow_run_id"`
	MessageID      string `json:"message_id,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
	CreatedAt      int64  `json:"created_at,omitempty"`
}

// Name implements Event.
func (e Envelope) Name() string { return e.Event }

// WorkflowStarted opens every run.
type WorkflowStarted struct {
	Envelope
	Data WorkflowStartedData `json:"data"`
}

// WorkflowStartedData is the data of workflow_started.
type WorkflowStartedData struct {
	ID         string         `json:"id"`
	WorkflowID string         `json:"workflow_id"`
	Inputs     map[string]any `json:"inputs"`
	CreatedAt  int64          `json:"created_at"`
	// Reason is "initial" for a fresh run.
	Reason string `json:"reason,omitempty"`
}

// NodeStarted is sent when a node begins.
type NodeStarted struct {
	Envelope
	Data NodeStartedData `json:"data"`
}

// NodeStartedData is the data of node_started.
type NodeStartedData struct {
	ID                string         `json:"id"`
	NodeID            string         `json:"node_id"`
	NodeType          string         `json:"node_type"`
	Title             string         `json:"title"`
	Index             int            `json:"index"`
	PredecessorNodeID *string        `json:"predecessor_node_id"`
	Inputs            map[string]any `json:"inputs"`
	CreatedAt         int64          `json:"created_at"`
	Extras            map[string]any `json:"extras"`
	IterationID       *string        `json:"iteration_id"`
	LoopID            *string        `json:"loop_id"`
}

// NodeFinished is sent when a node has ended, whatever the outcome.
type NodeFinished struct {
	Envelope
	Data NodeFinishedData `json:"data"`
}

// NodeFinishedData is the data of node_finished. Status is one of
// NodeSucceeded, NodeFailed, NodeException.
type NodeFinishedData struct {
	ID                string         `json:"id"`
	NodeID            string         `json:"node_id"`
	NodeType          string         `json:"node_type"`
	Title             string         `json:"title"`
	Index             int            `json:"index"`
	PredecessorNodeID *string        `json:"predecessor_node_id"`
	Inputs            map[string]any `json:"inputs"`
	ProcessData       map[string]any `json:"process_data"`
	Outputs           map[string]any `json:"outputs"`
	Status            string         `json:"status"`
	Error             *string        `json:"error"`
	ElapsedTime       float64        `json:"elapsed_time"`
	ExecutionMetadata map[string]any `json:"execution_metadata"`
	CreatedAt         int64          `json:"created_at"`
	FinishedAt        int64          `json:"finished_at"`
	Files             []any          `json:"files"`
	IterationID       *string        `json:"iteration_id"`
	LoopID            *string        `json:"loop_id"`
}

// NodeRetry is sent after a failed attempt when the node will be tried
// again.
type NodeRetry struct {
	Envelope
	Data NodeRetryData `json:"data"`
}

// NodeRetryData is the data of node_retry.
type NodeRetryData struct {
	NodeFinishedData
	// RetryIndex counts retries from 0.
	RetryIndex int `json:"retry_index"`
}

// TextChunk carries streamed text: the answer of a chatflow (the handler
// turns it into message events) or LLM text flowing into a workflow's end.
type TextChunk struct {
	Envelope
	Data TextChunkData `json:"data"`
}

// TextChunkData is the data of text_chunk.
type TextChunkData struct {
	Text                 string   `json:"text"`
	FromVariableSelector []string `json:"from_variable_selector"`
}

// WorkflowFinished closes every run.
type WorkflowFinished struct {
	Envelope
	Data WorkflowFinishedData `json:"data"`
}

// WorkflowFinishedData is the data of workflow_finished.
type WorkflowFinishedData struct {
	ID              string         `json:"id"`
	WorkflowID      string         `json:"workflow_id"`
	Status          string         `json:"status"`
	Outputs         map[string]any `json:"outputs"`
	Error           *string        `json:"error"`
	ElapsedTime     float64        `json:"elapsed_time"`
	TotalTokens     int            `json:"total_tokens"`
	TotalSteps      int            `json:"total_steps"`
	CreatedAt       int64          `json:"created_at"`
	FinishedAt      int64          `json:"finished_at"`
	ExceptionsCount int            `json:"exceptions_count"`
	Files           []any          `json:"files"`
	CreatedBy       map[string]any `json:"created_by,omitempty"`
}

// Events of iteration and loop nodes.
const (
	EventIterationStarted   = "iteration_started"
	EventIterationNext      = "iteration_next"
	EventIterationCompleted = "iteration_completed"
	EventLoopStarted        = "loop_started"
	EventLoopNext           = "loop_next"
	EventLoopCompleted      = "loop_completed"
)

// ContainerStartedData is the data of iteration_started and loop_started.
// ID is the container node's execution id.
type ContainerStartedData struct {
	ID        string         `json:"id"`
	NodeID    string         `json:"node_id"`
	NodeType  string         `json:"node_type"`
	Title     string         `json:"title"`
	CreatedAt int64          `json:"created_at"`
	Inputs    map[string]any `json:"inputs"`
	Metadata  map[string]any `json:"metadata"`
	Extras    map[string]any `json:"extras"`
}

// ContainerNextData is the data of iteration_next and loop_next: the
// round about to run.
type ContainerNextData struct {
	ID        string         `json:"id"`
	NodeID    string         `json:"node_id"`
	NodeType  string         `json:"node_type"`
	Title     string         `json:"title"`
	Index     int            `json:"index"`
	CreatedAt int64          `json:"created_at"`
	Extras    map[string]any `json:"extras"`
}

// ContainerCompletedData is the data of iteration_completed and
// loop_completed.
type ContainerCompletedData struct {
	ID                string         `json:"id"`
	NodeID            string         `json:"node_id"`
	NodeType          string         `json:"node_type"`
	Title             string         `json:"title"`
	Outputs           map[string]any `json:"outputs"`
	Inputs            map[string]any `json:"inputs"`
	CreatedAt         int64          `json:"created_at"`
	Extras            map[string]any `json:"extras"`
	Status            string         `json:"status"`
	Error             *string        `json:"error"`
	ElapsedTime       float64        `json:"elapsed_time"`
	TotalTokens       int            `json:"total_tokens"`
	ExecutionMetadata map[string]any `json:"execution_metadata"`
	FinishedAt        int64          `json:"finished_at"`
	Steps             int            `json:"steps"`
}

// IterationStarted is sent when an iteration node begins.
type IterationStarted struct {
	Envelope
	Data ContainerStartedData `json:"data"`
}

// IterationNext is sent before each item of an iteration.
type IterationNext struct {
	Envelope
	Data ContainerNextData `json:"data"`
}

// IterationCompleted is sent when an iteration node has ended.
type IterationCompleted struct {
	Envelope
	Data ContainerCompletedData `json:"data"`
}

// LoopStarted is sent when a loop node begins.
type LoopStarted struct {
	Envelope
	Data ContainerStartedData `json:"data"`
}

// LoopNext is sent before each round of a loop.
type LoopNext struct {
	Envelope
	Data ContainerNextData `json:"data"`
}

// LoopCompleted is sent when a loop node has ended.
type LoopCompleted struct {
	Envelope
	Data ContainerCompletedData `json:"data"`
}
