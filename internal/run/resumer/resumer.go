package resumer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"appkb/internal/apps"
	"appkb/internal/run/workflow"
	"appkb/internal/run/workflowruns"
)

// EngineFunc builds the engine that runs one run for its end user.
type EngineFunc func(meta workflowruns.RunMeta) *workflow.Engine

// TrackFunc registers a running task so that a stop request can cancel
// it; the returned function unregisters it.
type TrackFunc func(taskID, appID, user string, cancel context.CancelCauseFunc) func()

// Resumer continues paused runs in the background once their forms are
// answered or expire, publishing each resumed segment on the Hub.
type Resumer struct {
	Runs   *workflowruns.Store
	Forms  *workflowruns.Forms
	Engine EngineFunc
	Hub    *Hub
	Track  TrackFunc
	// Finished, when set, is told about every resumed segment that ended
	// without pausing again (chatflows store their answer there). The
	// events it returns close the segment.
	Finished func(ctx context.Context, def *apps.Definition, run *workflowruns.Paused, res *workflow.Result) []workflow.Event
	Log      *slog.Logger
	// ExpireEvery is how often Start's loop times out overdue forms
	// (default a minute).
	ExpireEvery time.Duration

	mu     sync.Mutex
	base   context.Context // resumed runs run on it; set by Start
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start makes resumed runs run on ctx and times out overdue forms every
// ExpireEvery until Stop. Before Start, runs resume on a context nobody
// cancels (tests that build a server without its workers).
func (r *Resumer) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return
	}
	r.base, r.cancel = context.WithCancel(ctx)
	every := r.ExpireEvery
	if every <= 0 {
		every = time.Minute
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.expireLoop(r.base, every)
	}()
}

// Stop cancels resumed runs and the expiry loop and waits for them to
// return. The runs it cancels are recorded as failed by the engine; a
// run that paused stays paused and resumes after the next start.
func (r *Resumer) Stop() {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.wg.Wait()
}

// context is the context resumed runs run on.
func (r *Resumer) context() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.base == nil {
		return context.Background()
	}
	return r.base
}

// Submit answers the form with the given token and resumes its run.
func (r *Resumer) Submit(ctx context.Context, appID, token, user, action string, data map[string]any) error {
	form, err := r.Forms.Submit(ctx, appID, token, user, action, data)
	if err != nil {
		return err
	}
	r.Kick(form.RunID)
	return nil
}

// Kick resumes the run if it is paused: the run is claimed (its stored
// status turns to running) before Kick returns, and runs on in the
// background. A run still finishing other branches picks its answered
// forms up when it pauses (see Paused).
func (r *Resumer) Kick(runID string) {
	ctx := r.context()
	if ctx.Err() != nil {
		return // stopping: the run stays paused for the next start
	}
	p, ok, err := r.Forms.Claim(ctx, runID)
	if err != nil {
		r.Log.Error("workflow: claiming a paused run failed", "run", runID, "err", err)
		return
	}
	if !ok {
		return
	}
	// The segment is open before Kick returns, so that a client who
	// follows the run from now on sees all of it.
	seg := r.Hub.Begin(runID)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer seg.End()
		defer func() {
			if p := recover(); p != nil {
				r.Log.Error("workflow: a resumed run panicked", "run", runID, "panic", p, "stack", string(debug.Stack()))
			}
		}()
		if err := r.resume(ctx, p, seg); err != nil {
			r.Log.Error("workflow: resuming a run failed", "run", runID, "err", err)
			if ferr := r.Runs.Fail(context.WithoutCancel(ctx), runID, "The run could not be resumed: "+err.Error()); ferr != nil {
				r.Log.Error("workflow: recording a failed resumption failed", "run", runID, "err", ferr)
			}
		}
	}()
}

// Paused is called when a run has just paused: forms answered while it
// was still running are taken up at once.
func (r *Resumer) Paused(ctx context.Context, res *workflow.Result) {
	forms, err := r.Forms.OfRun(ctx, res.RunID)
	if err != nil {
		r.Log.Error("workflow: reading the forms of a paused run failed", "run", res.RunID, "err", err)
		return
	}
	for _, id := range res.Snapshot.Paused {
		if f := forms[id]; f != nil && f.Status != workflow.FormWaiting {
			r.Kick(res.RunID)
			return
		}
	}
}

// resume runs a claimed paused run on from its snapshot.
func (r *Resumer) resume(ctx context.Context, p *workflowruns.Paused, seg *Segment) error {
	run := p.Run
	version, err := r.Runs.ByID(ctx, run.AppID, run.WorkflowID)
	if err != nil {
		return fmt.Errorf("load the version of the run: %w", err)
	}
	graph, err := r.Runs.Graph(version)
	if err != nil {
		return err
	}
	var inputs map[string]any
	if err := json.Unmarshal([]byte(run.Inputs), &inputs); err != nil {
		return fmt.Errorf("decode run inputs: %w", err)
	}
	mode := workflow.ModeWorkflow
	if version.Def.App.Mode == apps.ModeAdvancedChat {
		mode = workflow.ModeChatflow
	}
	meta := workflowruns.RunMeta{}
	if run.EndUserID != nil {
		meta.EndUserID = *run.EndUserID
	}
	user, _ := p.Snapshot.Variables[workflow.ScopeSys]["user_id"].(string)
	in := workflow.RunInput{
		Graph: graph, Mode: mode, Inputs: inputs, UserID: user, AppID: run.AppID, WorkflowID: run.WorkflowID,
		ConversationID: deref(run.ConversationID), MessageID: deref(run.MessageID),
		TaskID: run.TaskID, RunID: run.ID,
		Resume: &workflow.Resume{Snapshot: p.Snapshot, Forms: p.Forms},
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if r.Track != nil {
		defer r.Track(run.TaskID, run.AppID, user, cancel)()
	}
	res, err := r.Engine(meta).Run(runCtx, in, seg.Publish)
	if err != nil {
		return err
	}
	if res.Status == workflow.RunPaused {
		r.Paused(ctx, res)
	} else if r.Finished != nil {
		for _, ev := range r.Finished(ctx, version.Def, p, res) {
			seg.Publish(ev)
		}
	}
	return nil
}

// expireLoop times out overdue forms every interval until ctx ends, and
// lets their runs go on along their timeout branches.
func (r *Resumer) expireLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		r.ExpireNow(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ExpireNow times out the forms that are overdue now.
func (r *Resumer) ExpireNow(ctx context.Context) {
	runs, err := r.Forms.ExpireDue(ctx, time.Now())
	if err != nil {
		r.Log.Error("workflow: expiring forms failed", "err", err)
		return
	}
	for _, id := range runs {
		r.Kick(id)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
