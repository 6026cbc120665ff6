package workflowruns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"appkb/internal/platform/cluster"
	"appkb/internal/platform/groupcommit"
	"appkb/internal/run/workflow"
	"appkb/models"
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

// RunMeta is what a run's records hold beyond what the engine reports,
// and how they are written.
type RunMeta struct {
	// EndUserID is the stored end user who started the run.
	EndUserID string
	// Blocking says that nobody sees the run's events as they happen: the
	// request that started it answers once it has ended, and only then
	// learns the run's id. Its node executions need not be stored before
	// the engine goes on, only by the time the request answers, so they
	// are queued without waiting, its end too unless it paused; the caller
	// must call Recorder.Flush before it answers (see Recorder). The run
	// itself is stored at once, so that the app's logs list it while it
	// runs.
	Blocking bool
}

// SetReplica makes the runs this store starts or resumes carry r's id, so
// that other replicas leave them alone while r is alive (see
// CloseInterrupted). Call it before the store records any run.
func (s *Store) SetReplica(r *cluster.Replica) { s.replica = r }

// Recorder returns the workflow.RunStore for one run started by meta's
// end user.
func (s *Store) Recorder(meta RunMeta) *Recorder {
	return &Recorder{s: s, meta: meta}
}

// Recorder stores one run and its node executions through the shared
// write queue. For a run someone follows, each call returns once its row
// is committed, so that what the event after it announces can be read
// back at once. For a blocking run (RunMeta.Blocking), the run is stored
// at once, but its node executions and its end are only queued: they ride
// along with whatever batch commits next, and the run goes on at once;
// Flush waits for all of them (RunFinished does for a run that paused, which the
// resumer reads at once), so the run's rows are stored when the request
// answers, in the same batch as the rows the caller writes next. A queued
// row that failed is reported by the next call, which then stores
// nothing (the node it records fails, and with it the run, as when a row
// fails at once).
type Recorder struct {
	s    *Store
	meta RunMeta
	// mu guards queued: nodes of parallel branches finish concurrently.
	mu sync.Mutex
	// queued are the blocking run's writes not yet seen committed.
	queued []*groupcommit.Pending
	// onceMu guards once, the long texts the run's node records already
	// hold whole (see shared.go).
	onceMu sync.Mutex
	once   onceStore
}

var _ workflow.RunStore = (*Recorder)(nil)

// write stores fn through the shared queue; see Recorder.
func (r *Recorder) write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if !r.meta.Blocking {
		return r.s.commits.Write(ctx, fn)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.settled(); err != nil {
		return err
	}
	r.queued = append(r.queued, r.s.commits.Later(fn))
	if len(r.queued) >= maxQueued {
		// A long run on a quiet server: nobody else's write has taken
		// these along, so commit them now rather than hold them all.
		return r.flushLocked(ctx)
	}
	return nil
}

// maxQueued bounds the writes a blocking run keeps queued.
const maxQueued = 64

// settled drops the queued writes that are committed and returns the
// error of the first one that failed (once). r.mu is held.
func (r *Recorder) settled() error {
	var failed error
	kept := r.queued[:0]
	for _, p := range r.queued {
		done, err := p.Done()
		switch {
		case !done:
			kept = append(kept, p)
		case err != nil && failed == nil:
			failed = err
		}
	}
	clear(r.queued[len(kept):])
	r.queued = kept
	return failed
}

// Flush waits for every write a blocking run queued and returns the first
// error. The caller of a blocking run calls it before it answers: the
// end of a run that did not pause is only queued (see RunMeta.Blocking).
// Without queued writes, it returns at once.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushLocked(ctx)
}

func (r *Recorder) flushLocked(ctx context.Context) error {
	var first error
	for _, p := range r.queued {
		if err := p.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	r.queued = nil
	return first
}

// Forms is the form store for the run's human-input nodes. A form names
// its run, which must be stored first: for a blocking run, the queued
// writes are waited for before a form is created.
func (r *Recorder) Forms() workflow.FormStore {
	if !r.meta.Blocking {
		return r.s.Forms()
	}
	return formsAfterFlush{r}
}

type formsAfterFlush struct{ r *Recorder }

func (f formsAfterFlush) CreateForm(ctx context.Context, runID string, form *workflow.HumanForm) error {
	if err := f.r.Flush(ctx); err != nil {
		return fmt.Errorf("store the run of a form: %w", err)
	}
	return f.r.s.Forms().CreateForm(ctx, runID, form)
}

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

func (r *Recorder) RunStarted(ctx context.Context, run *workflow.RunRecord) error {
	row := &models.WorkflowRun{
		ID: run.ID, AppID: run.AppID, WorkflowID: run.WorkflowID, TaskID: run.TaskID,
		EndUserID: optString(r.meta.EndUserID), TriggeredFrom: TriggeredFromAppRun, CreatedFrom: CreatedFromService,
		ConversationID: optString(run.ConversationID), MessageID: optString(run.MessageID),
		Status: StatusRunning, Inputs: jsonText(run.Inputs, "{}"), CreatedAt: time.Unix(run.CreatedAt, 0).UTC(),
		ReplicaID: r.s.replica.OwnerID(),
	}
	// Stored at once even for a blocking run, as Dify does: the run is
	// listed (running) in the app's logs while it runs, and a server that
	// stops meanwhile leaves it to be closed as interrupted.
	err := r.s.commits.Write(ctx, func(tx *gorm.DB) error { return models.InsertWorkflowRun(tx, row) })
	if err != nil {
		return fmt.Errorf("store workflow run: %w", err)
	}
	return nil
}

func (r *Recorder) RunResumed(ctx context.Context, run *workflow.RunRecord) error {
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

func (r *Recorder) NodeFinished(ctx context.Context, d *workflow.NodeFinishedData, runID string) error {
	finished := time.Unix(d.FinishedAt, 0).UTC()
	// A long text an earlier record holds whole is kept as a preview.
	r.onceMu.Lock()
	inputs := r.once.shortenMap(d.Inputs, fmt.Sprintf("inputs of node %q (%s)", d.Title, d.NodeID))
	process := r.once.shortenMap(d.ProcessData, fmt.Sprintf("process data of node %q (%s)", d.Title, d.NodeID))
	outputs := r.once.shortenMap(d.Outputs, fmt.Sprintf("outputs of node %q (%s)", d.Title, d.NodeID))
	r.onceMu.Unlock()
	row := &models.WorkflowNodeExecution{
		ID: d.ID, WorkflowRunID: runID, NodeID: d.NodeID, NodeType: d.NodeType, Title: d.Title,
		NodeIndex: d.Index, PredecessorNodeID: d.PredecessorNodeID,
		Inputs: jsonText(inputs, "{}"), ProcessData: optJSON(process), Outputs: optJSON(outputs),
		Status: d.Status, Error: d.Error, ElapsedTime: d.ElapsedTime,
		ExecutionMetadata: jsonText(d.ExecutionMetadata, "{}"),
		CreatedAt:         time.Unix(d.CreatedAt, 0).UTC(), FinishedAt: &finished,
	}
	err := r.write(ctx, func(tx *gorm.DB) error { return models.InsertNodeExecution(tx, row) })
	if err != nil {
		return fmt.Errorf("store node execution: %w", err)
	}
	return nil
}

func (r *Recorder) RunFinished(ctx context.Context, run *workflow.RunRecord, res *workflow.Result) error {
	now := time.Now().UTC()
	outputs := res.Outputs
	if outputs == nil {
		outputs = map[string]any{}
	}
	var pause *string
	if res.Snapshot != nil {
		text, err := res.Snapshot.Marshal()
		if err != nil {
			return errors.Join(err, r.Flush(ctx))
		}
		pause = &text
	}
	end := &models.WorkflowRunEnd{
		Status: res.Status, Outputs: jsonText(outputs, "{}"), Error: optString(res.Error),
		ElapsedTime: res.ElapsedTime, TotalTokens: res.TotalTokens, TotalSteps: res.TotalSteps,
		ExceptionsCount: res.ExceptionsCount, FinishedAt: now, PauseState: pause,
	}
	fn := func(tx *gorm.DB) error { return models.FinishWorkflowRun(tx, run.ID, end) }
	if r.meta.Blocking && res.Status != workflow.RunPaused {
		// The caller's own rows (a chatflow's message) ride along with
		// it; Flush waits for all.
		r.mu.Lock()
		r.queued = append(r.queued, r.s.commits.Later(fn))
		r.mu.Unlock()
		return nil
	}
	// Queued after the run's other writes, so committed after them.
	err := r.s.commits.Write(ctx, fn)
	return errors.Join(err, r.Flush(ctx))
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
