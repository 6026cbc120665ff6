package workflow

// EventAgentLog names the events an agent node sends for each step it
// takes.
const EventAgentLog = "agent_log"

// Agent log states.
const (
	AgentLogStart   = "start"
	AgentLogSuccess = "success"
	AgentLogError   = "error"
)

// AgentLog reports one step of an agent node: a round, a model call or a
// tool call. A round is sent when it starts and again, with the same id,
// when it ends; the steps inside it name it as their parent.
type AgentLog struct {
	Envelope
	Data AgentLogData `json:"data"`
}

// AgentLogData is the data of agent_log.
type AgentLogData struct {
	NodeExecutionID string         `json:"node_execution_id"`
	ID              string         `json:"id"`
	Label           string         `json:"label"`
	ParentID        *string        `json:"parent_id"`
	Error           *string        `json:"error"`
	Status          string         `json:"status"`
	Data            map[string]any `json:"data"`
	Metadata        map[string]any `json:"metadata"`
	NodeID          string         `json:"node_id"`
}
