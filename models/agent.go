package models

// AgentThought is one reasoning or tool step of an agent's answer, as a
// message stores it in its agent_thoughts and the API returns it.
type AgentThought struct {
	ID         string         `json:"id"`
	ChainID    *string        `json:"chain_id"`
	MessageID  string         `json:"message_id"`
	Position   int            `json:"position"`
	Thought    string         `json:"thought"`
	Tool       string         `json:"tool"`
	ToolLabels map[string]any `json:"tool_labels"`
	ToolInput  string         `json:"tool_input"`
	// Observation is what the tools returned.
	Observation string   `json:"observation"`
	Files       []string `json:"files"`
	CreatedAt   int64    `json:"created_at"`
}
