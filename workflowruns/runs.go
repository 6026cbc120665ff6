package workflowruns

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"appkb/cluster"
	"appkb/models"
	"appkb/workflow"
)

// Where runs come from (the triggered_from and created_from columns).
const (
	TriggeredFromAppRun = "app-run"
	CreatedFromService  = "service-api"
)

// Run statuses besides the final ones of package workflow: a run is
// running until it ends or pauses, and a paused run waits for human input
// until the resumer claims it (back to running).
const (
	StatusRunning = "running"
	StatusPaused  = workflow.RunPaused
)

// RunMeta is what a run's records hold beyond what the engine reports.
type RunMeta struct {
	// EndUserID is the stored end user who started the run.
	EndUserID string
}

// SetReplica makes the runs this store starts or resumes carry r's id, so
// that other replicas leave them alone while r is alive (see
// CloseInterrupted). Call it before the store records any run.
func (s *Store) SetReplica(r *cluster.Replica) { s.replica = r }

// Recorder returns the workflow.RunStore for one run started by meta's
// end user.
func (s *Store) Recorder(meta RunMeta) workflow.RunStore {
	return &recorder{s: s, meta: meta}
}

type recorder struct {
	s    *Store
	meta RunMeta
}

var _ workflow.RunStore = (*recorder)(nil)

// jsonText encodes v as JSON, giving empty for nil values.
func jsonText(v any, empty string) string {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return empty
	}
	return string(b)
}

func optJSON(v map[string]any) *string {
	if v == nil {
		return nil
	}
	s := jsonText(v, "{}")
	return &s
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (r *recorder) RunStarted(ctx context.Context, run *workflow.RunRecord) error {
	row := &models.WorkflowRun{
		ID: run.ID, AppID: run.AppID, WorkflowID: run.WorkflowID, TaskID: run.TaskID,
		EndUserID: optString(r.meta.EndUserID), TriggeredFrom: TriggeredFromAppRun, CreatedFrom: CreatedFromService,
		ConversationID: optString(run.ConversationID), MessageID: optString(run.MessageID),
		Status: StatusRunning, Inputs: jsonText(run.Inputs, "{}"), CreatedAt: time.Unix(run.CreatedAt, 0).UTC(),
		ReplicaID: r.s.replica.OwnerID(),
	}
	err := r.s.commits.Write(ctx, func(tx *gorm.DB) error { return models.InsertWorkflowRun(tx, row) })
	if err != nil {
		return fmt.Errorf("store workflow run: %w", err)
	}
	return nil
}

func (r *recorder) RunResumed(ctx context.Context, run *workflow.RunRecord) error {
	err := r.s.commits.Write(ctx, func(tx *gorm.DB) error {
		return tx.Model(&models.WorkflowRun{}).Where("id = ?", run.ID).Updates(map[string]any{
			"status": StatusRunning, "pause_state": nil, "finished_at": nil, "replica_id": r.s.replica.OwnerID(),
		}).Error
	})
	if err != nil {
		return fmt.Errorf("store resumed workflow run: %w", err)
	}
	return nil
}

func (r *recorder) NodeFinished(ctx context.Context, d *workflow.NodeFinishedData, runID string) error {
	finished := time.Unix(d.FinishedAt, 0).UTC()
	row := &models.WorkflowNodeExecution{
		ID: d.ID, WorkflowRunID: runID, NodeID: d.NodeID, NodeType: d.NodeType, Title: d.Title,
		NodeIndex: d.Index, PredecessorNodeID: d.PredecessorNodeID,
		Inputs: jsonText(d.Inputs, "{}"), ProcessData: optJSON(d.ProcessData), Outputs: optJSON(d.Outputs),
		Status: d.Status, Error: d.Error, ElapsedTime: d.ElapsedTime,
		ExecutionMetadata: jsonText(d.ExecutionMetadata, "{}"),
		CreatedAt:         time.Unix(d.CreatedAt, 0).UTC(), FinishedAt: &finished,
	}
	err := r.s.commits.Write(ctx, func(tx *gorm.DB) error { return models.InsertNodeExecution(tx, row) })
	if err != nil {
		return fmt.Errorf("store node execution: %w", err)
	}
	return nil
}

func (r *recorder) RunFinished(ctx context.Context, run *workflow.RunRecord, res *workflow.Result) error {
	now := time.Now().UTC()
	outputs := res.Outputs
	if outputs == nil {
		outputs = map[string]any{}
	}
	var pause *string
	if res.Snapshot != nil {
		text, err := res.Snapshot.Marshal()
		if err != nil {
			return err
		}
		pause = &text
	}
	end := &models.WorkflowRunEnd{
		Status: res.Status, Outputs: jsonText(outputs, "{}"), Error: optString(res.Error),
		ElapsedTime: res.ElapsedTime, TotalTokens: res.TotalTokens, TotalSteps: res.TotalSteps,
		ExceptionsCount: res.ExceptionsCount, FinishedAt: now, PauseState: pause,
	}
	return r.s.commits.Write(ctx, func(tx *gorm.DB) error { return models.FinishWorkflowRun(tx, run.ID, end) })
}

// Fail ends a run that could not go on with the given error.
func (s *Store) Fail(ctx context.Context, runID, msg string) error {
	now := time.Now().UTC()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.db.WithContext(ctx).Model(&models.WorkflowRun{}).Where("id = ?", runID).Updates(map[string]any{
		"status": workflow.RunFailed, "error": msg, "finished_at": now, "pause_state": nil,
	}).Error
}

// InterruptedError is the error recorded for runs that a stopped server
// left unfinished.
const InterruptedError = "The run was interrupted: the server stopped before it finished."

// CloseInterrupted marks as failed the runs still recorded as running that
// nobody runs any more, and returns how many it closed. Alone on its
// database (r nil, or SQLite) that is every running run: call it once at
// start-up, before any run can begin, when a running row can only be left
// over from a server that stopped. On a shared database it is the runs of
// dead replicas (see cluster.Replica.Orphaned), so a starting replica
// leaves the live runs of the others alone; replicas repeat it
// periodically to close the runs of one that died.
func (s *Store) CloseInterrupted(ctx context.Context, r *cluster.Replica) (int64, error) {
	now := time.Now().UTC()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	res := s.db.WithContext(ctx).Model(&models.WorkflowRun{}).Where("status = ?", StatusRunning).Where(r.Interrupted("replica_id")).Updates(map[string]any{
		"status":      workflow.RunFailed,
		"error":       InterruptedError,
		"finished_at": now,
	})
	return res.RowsAffected, res.Error
}
