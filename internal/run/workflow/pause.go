package workflow

import (
	"context"
	"encoding/json"
	"fmt"
)

// RunPaused is the state of a run that waits for human input. It is not
// final: the run goes on when its form is answered (see RunInput.Resume).
const RunPaused = "paused"

// Events of a run that pauses for human input and resumes.
const (
	EventWorkflowPaused        = "workflow_paused"
	EventHumanInputRequired    = "human_input_required"
	EventHumanInputFormFilled  = "human_input_form_filled"
	EventHumanInputFormTimeout = "human_input_form_timeout"
)

// Form states.
const (
	FormWaiting   = "waiting"
	FormSubmitted = "submitted"
	// FormTimeout is a form whose time ran out; the run went on along the
	// node's timeout branch.
	FormTimeout = "timeout"
)

// TimeoutAction is the action id, and edge handle, of a form that
// expired unanswered.
const TimeoutAction = "__timeout"

// HumanForm is the form a human-input node waits on: what it shows, the
// fields and buttons it offers, and, once answered, the answer.
type HumanForm struct {
	ID        string `json:"id"`
	Token     string `json:"token"`
	NodeID    string `json:"node_id"`
	NodeTitle string `json:"node_title"`
	// Content is the form text with workflow variables filled in; the
	// {{#$outputs.name#}} places of the fields are left as they are.
	Content string `json:"form_content"`
	// Inputs and Actions are the node's inputs and user_actions, as the
	// file declares them.
	Inputs  []map[string]any `json:"inputs"`
	Actions []map[string]any `json:"user_actions"`
	// Defaults are the fields' default values as text, by field name.
	Defaults map[string]string `json:"resolved_default_values"`
	// Options are the allowed values of select fields, by field name,
	// resolved when the form was made.
	Options   map[string][]string `json:"options,omitempty"`
	ExpiresAt int64               `json:"expiration_time"`
	CreatedAt int64               `json:"created_at"`

	// Status is FormWaiting, FormSubmitted or FormTimeout.
	Status   string         `json:"status"`
	ActionID string         `json:"action_id,omitempty"`
	Data     map[string]any `json:"submitted_data,omitempty"`
}

// FormStore keeps the forms of paused runs. The engine calls it when a
// human-input node is first reached, before it announces the form.
type FormStore interface {
	CreateForm(ctx context.Context, runID string, form *HumanForm) error
}

// Snapshot is what a paused run needs to go on later: its variables (not
// the environment ones, which come from the definition again, so that
// secrets are never stored), which nodes ran or were skipped, which edges
// were taken, and its counters. It is plain JSON.
type Snapshot struct {
	Variables  map[string]map[string]any `json:"variables"`
	Nodes      map[string]string         `json:"nodes"`
	Edges      []int                     `json:"edges"`
	Paused     []string                  `json:"paused"`
	Steps      int64                     `json:"steps"`
	Exceptions int64                     `json:"exceptions"`
	Tokens     int                       `json:"tokens"`
	Outputs    map[string]any            `json:"outputs"`
	HasEnd     bool                      `json:"has_end"`
	Answer     string                    `json:"answer"`
	Streamed   map[string]bool           `json:"streamed"`
	// Elapsed is the running time before the pause, in seconds.
	Elapsed   float64 `json:"elapsed"`
	CreatedAt int64   `json:"created_at"`
}

// Marshal encodes the snapshot for storage.
func (s *Snapshot) Marshal() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode run snapshot: %w", err)
	}
	return string(b), nil
}

// UnmarshalSnapshot decodes a stored snapshot.
func UnmarshalSnapshot(text string) (*Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, fmt.Errorf("decode run snapshot: %w", err)
	}
	return &s, nil
}

// Resume continues a paused run. Forms holds the run's forms by node id;
// the answered ones let their nodes finish, the others pause again.
type Resume struct {
	Snapshot *Snapshot
	Forms    map[string]*HumanForm
}

// WorkflowPaused ends the events of a run that waits for human input.
type WorkflowPaused struct {
	Envelope
	Data WorkflowPausedData `json:"data"`
}

// WorkflowPausedData is the data of workflow_paused.
type WorkflowPausedData struct {
	WorkflowRunID string           `json:"workflow_run_id"`
	PausedNodes   []string         `json:"paused_nodes"`
	Outputs       map[string]any   `json:"outputs"`
	Reasons       []map[string]any `json:"reasons"`
	Status        string           `json:"status"`
	CreatedAt     int64            `json:"created_at"`
	ElapsedTime   float64          `json:"elapsed_time"`
	TotalTokens   int              `json:"total_tokens"`
	TotalSteps    int              `json:"total_steps"`
}

// HumanInputRequired announces a form the run waits on.
type HumanInputRequired struct {
	Envelope
	Data HumanInputRequiredData `json:"data"`
}

// HumanInputRequiredData is the data of human_input_required.
type HumanInputRequiredData struct {
	FormID         string            `json:"form_id"`
	NodeID         string            `json:"node_id"`
	NodeTitle      string            `json:"node_title"`
	FormContent    string            `json:"form_content"`
	Inputs         []map[string]any  `json:"inputs"`
	Actions        []map[string]any  `json:"actions"`
	DisplayInUI    bool              `json:"display_in_ui"`
	FormToken      *string           `json:"form_token"`
	ResolvedValues map[string]string `json:"resolved_default_values"`
	ExpirationTime *int64            `json:"expiration_time"`
}

// HumanInputFormFilled is sent when the run goes on after an answer.
type HumanInputFormFilled struct {
	Envelope
	Data HumanInputFormFilledData `json:"data"`
}

// HumanInputFormFilledData is the data of human_input_form_filled.
type HumanInputFormFilledData struct {
	NodeID          string         `json:"node_id"`
	NodeTitle       string         `json:"node_title"`
	RenderedContent string         `json:"rendered_content"`
	ActionID        string         `json:"action_id"`
	ActionText      string         `json:"action_text"`
	SubmittedData   map[string]any `json:"submitted_data"`
}

// HumanInputFormTimeout is sent when the run goes on because a form
// expired unanswered.
type HumanInputFormTimeout struct {
	Envelope
	Data HumanInputFormTimeoutData `json:"data"`
}

// HumanInputFormTimeoutData is the data of human_input_form_timeout.
type HumanInputFormTimeoutData struct {
	NodeID         string `json:"node_id"`
	NodeTitle      string `json:"node_title"`
	ExpirationTime int64  `json:"expiration_time"`
}

// RequiredEvent is the human_input_required event announcing f.
func (f *HumanForm) RequiredEvent(env Envelope) *HumanInputRequired {
	env.Event = EventHumanInputRequired
	token, exp := f.Token, f.ExpiresAt
	return &HumanInputRequired{Envelope: env, Data: HumanInputRequiredData{
		FormID: f.ID, NodeID: f.NodeID, NodeTitle: f.NodeTitle, FormContent: f.Content,
		Inputs: f.Inputs, Actions: f.Actions, DisplayInUI: true, FormToken: &token,
		ResolvedValues: f.Defaults, ExpirationTime: &exp,
	}}
}

// snapshot copies every variable but the environment ones, as plain JSON
// values.
func (p *Pool) snapshot() map[string]map[string]any {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make(map[string]map[string]any, len(p.vars))
	for scope, vars := range p.vars {
		if scope == ScopeEnv {
			continue
		}
		m := make(map[string]any, len(vars))
		for k, v := range vars {
			m[k] = plain(v)
		}
		out[scope] = m
	}
	return out
}

// restore puts a snapshot's variables back, over what is there.
func (p *Pool) restore(vars map[string]map[string]any) {
	for scope, m := range vars {
		if scope == ScopeEnv {
			continue
		}
		p.SetAll(scope, m)
	}
}

// PausedEvent is the workflow_paused event of a paused run.
func (res *Result) PausedEvent(env Envelope, createdAt int64) *WorkflowPaused {
	env.Event = EventWorkflowPaused
	reasons := make([]map[string]any, 0, len(res.Forms))
	for _, f := range res.Forms {
		reasons = append(reasons, map[string]any{"type": "human_input_required", "form_id": f.ID, "node_id": f.NodeID})
	}
	paused := []string{}
	if res.Snapshot != nil {
		paused = res.Snapshot.Paused
	}
	outputs := res.Outputs
	if outputs == nil {
		outputs = map[string]any{}
	}
	return &WorkflowPaused{Envelope: env, Data: WorkflowPausedData{
		WorkflowRunID: res.RunID, PausedNodes: paused, Outputs: plainMap(outputs), Reasons: reasons,
		Status: RunPaused, CreatedAt: createdAt, ElapsedTime: res.ElapsedTime,
		TotalTokens: res.TotalTokens, TotalSteps: res.TotalSteps,
	}}
}
