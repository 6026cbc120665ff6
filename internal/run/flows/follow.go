package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/chat"
	"appkb/internal/run/workflow"
	"appkb/internal/run/workflowruns"
	"appkb/models"
)

// FollowRequest names a run to follow.
type FollowRequest struct {
	AppID, RunID string
	// User must be the end user who started the run.
	User string
	// ContinueOnPause keeps the stream open past a pause, for what comes
	// after the form is answered.
	ContinueOnPause bool
	// IncludeSnapshot first sends a node_finished event for every node
	// execution stored so far.
	IncludeSnapshot bool
}

// Follow streams the events of a run of a workflow app or chatflow. A run
// in progress is followed live from the start of its current segment; a
// paused run shows the forms it waits on and workflow_paused (and, with
// ContinueOnPause, what comes after the answer); a finished run gives its
// workflow_finished alone. Someone else's run is not found.
func (s *Service) Follow(ctx context.Context, req FollowRequest) (*Run, error) {
	app, err := s.FlowApp(ctx, req.AppID)
	if err != nil {
		return nil, err
	}
	run, err := s.runs.Run(ctx, app.ID, req.RunID)
	if err != nil {
		return nil, err
	}
	user, err := s.users.Find(ctx, app.ID, req.User)
	if err != nil || run.EndUserID == nil || *run.EndUserID != user.ID {
		return nil, apperr.NotFound("Workflow run not found.")
	}
	chatflow := app.Mode == apps.ModeAdvancedChat
	return s.launch(ctx, run.TaskID, workflowError(run.TaskID, run.ID), func(ctx context.Context, r *Run) (*Result, error) {
		send := func(ev workflow.Event) error { return r.emit(clientEvent(ev, chatflow)) }
		if req.IncludeSnapshot {
			if err := s.replayNodes(ctx, run, send); err != nil {
				return nil, quiet(err)
			}
		}
		return nil, quiet(s.followRun(ctx, run, req.ContinueOnPause, send))
	}), nil
}

// quiet drops the error of a follower whose client went away.
func quiet(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// followRun sends the events of run until it ends, or pauses when keepOpen
// is false. Each segment of the run (its start, each resumption) is
// followed from the hub while the hub has it, otherwise the stored record
// tells where the run is.
func (s *Service) followRun(ctx context.Context, run *models.WorkflowRun, keepOpen bool, send func(workflow.Event) error) error {
	if s.events != nil {
		return s.followStored(ctx, run, keepOpen, send)
	}
	var after int64
	pausedSent := false // the current pause was shown already
	for {
		var last workflow.Event
		seq, found, err := s.hub.Follow(ctx, run.ID, after, func(ev workflow.Event) error {
			last = ev
			return send(ev)
		})
		if err != nil {
			return err
		}
		if found {
			after = seq
			if _, paused := last.(*workflow.WorkflowPaused); !paused || !keepOpen {
				return nil
			}
			pausedSent = true
		} else if over, err := s.showStored(ctx, run, keepOpen, &pausedSent, send); over {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.hub.Next(run.ID, after):
		case <-time.After(time.Second):
			// Look at the stored record again.
		}
	}
}

// showStored acts on the stored record of a run that has no segment to
// follow right now: a running run is between segments (wait for the
// next), a paused one shows its forms once per pause (*pausedSent), a
// finished one ends the follow with workflow_finished. over is set when
// the follow ends, with err.
func (s *Service) showStored(ctx context.Context, run *models.WorkflowRun, keepOpen bool, pausedSent *bool, send func(workflow.Event) error) (over bool, err error) {
	stored, err := s.runs.Run(ctx, run.AppID, run.ID)
	if err != nil {
		return true, err
	}
	switch stored.Status {
	case workflowruns.StatusRunning:
		*pausedSent = false
	case workflowruns.StatusPaused:
		if !*pausedSent {
			if err := s.sendPaused(ctx, stored, send); err != nil {
				return true, err
			}
			*pausedSent = true
		}
		return !keepOpen, nil
	default:
		return true, send(finishedEvent(stored))
	}
	return false, nil
}

// sendPaused sends the forms a stored paused run waits on, then
// workflow_paused.
func (s *Service) sendPaused(ctx context.Context, run *models.WorkflowRun, send func(workflow.Event) error) error {
	forms, err := s.forms.Waiting(ctx, run.ID)
	if err != nil {
		return err
	}
	env := workflow.Envelope{TaskID: run.TaskID, WorkflowRunID: run.ID}
	for _, f := range forms {
		if err := send(f.RequiredEvent(env)); err != nil {
			return err
		}
	}
	res := &workflow.Result{RunID: run.ID, Status: run.Status, ElapsedTime: run.ElapsedTime,
		TotalTokens: run.TotalTokens, TotalSteps: run.TotalSteps, Forms: forms}
	if run.PauseState != nil {
		if snap, err := workflow.UnmarshalSnapshot(*run.PauseState); err == nil {
			res.Snapshot = snap
		}
	}
	if run.Outputs != nil {
		_ = json.Unmarshal([]byte(*run.Outputs), &res.Outputs)
	}
	return send(res.PausedEvent(env, run.CreatedAt.Unix()))
}

// finishedEvent is the workflow_finished event of a stored, ended run.
func finishedEvent(run *models.WorkflowRun) *workflow.WorkflowFinished {
	outputs := map[string]any{}
	if run.Outputs != nil {
		_ = json.Unmarshal([]byte(*run.Outputs), &outputs)
	}
	var finished int64
	if run.FinishedAt != nil {
		finished = run.FinishedAt.Unix()
	}
	return &workflow.WorkflowFinished{
		Envelope: workflow.Envelope{Event: workflow.EventWorkflowFinished, TaskID: run.TaskID, WorkflowRunID: run.ID},
		Data: workflow.WorkflowFinishedData{
			ID: run.ID, WorkflowID: run.WorkflowID, Status: run.Status, Outputs: outputs, Error: run.Error,
			ElapsedTime: run.ElapsedTime, TotalTokens: run.TotalTokens, TotalSteps: run.TotalSteps,
			CreatedAt: run.CreatedAt.Unix(), FinishedAt: finished, ExceptionsCount: run.ExceptionsCount, Files: []any{},
		},
	}
}

// replayNodes sends a node_finished event for every node execution stored
// so far.
func (s *Service) replayNodes(ctx context.Context, run *models.WorkflowRun, send func(workflow.Event) error) error {
	execs, err := s.runs.NodeExecutions(ctx, run.ID)
	if err != nil {
		return err
	}
	for _, x := range execs {
		d := workflow.NodeFinishedData{
			ID: x.ID, NodeID: x.NodeID, NodeType: x.NodeType, Title: x.Title, Index: x.NodeIndex,
			PredecessorNodeID: x.PredecessorNodeID, Status: x.Status, Error: x.Error, ElapsedTime: x.ElapsedTime,
			CreatedAt: x.CreatedAt.Unix(), Files: []any{}, Inputs: map[string]any{},
		}
		if x.FinishedAt != nil {
			d.FinishedAt = x.FinishedAt.Unix()
		}
		for _, part := range []struct {
			text *string
			into *map[string]any
		}{{&x.Inputs, &d.Inputs}, {x.ProcessData, &d.ProcessData}, {x.Outputs, &d.Outputs}, {&x.ExecutionMetadata, &d.ExecutionMetadata}} {
			if part.text != nil {
				if err := json.Unmarshal([]byte(*part.text), part.into); err != nil {
					return fmt.Errorf("node execution %s: %w", x.ID, err)
				}
			}
		}
		ev := &workflow.NodeFinished{Envelope: workflow.Envelope{Event: workflow.EventNodeFinished, TaskID: run.TaskID, WorkflowRunID: run.ID}, Data: d}
		if err := send(ev); err != nil {
			return err
		}
	}
	return nil
}

// clientEvent is what a client of the app's kind sees of an engine event:
// a chatflow's answer text travels as message events.
func clientEvent(ev workflow.Event, chatflow bool) Event {
	tc, ok := ev.(*workflow.TextChunk)
	if !ok || !chatflow {
		return workflowEv(ev)
	}
	return chatEv(chat.MessageEvent{Event: chat.EventMessage, ID: tc.MessageID, Answer: tc.Data.Text, StreamBase: chat.StreamBase{
		TaskID: tc.TaskID, MessageID: tc.MessageID, ConversationID: tc.ConversationID, CreatedAt: tc.CreatedAt,
	}})
}

// followStored is followRun over the stored run events (PostgreSQL), which
// every replica reads, whichever executes the run: one source of order
// for all followers, also when a run pauses on one replica and resumes on
// another. The rules are the hub's: the latest segment is followed from
// its start while it runs, or for Hub.Retain after it ended; otherwise
// the stored run tells where the run is.
func (s *Service) followStored(ctx context.Context, run *models.WorkflowRun, keepOpen bool, send func(workflow.Event) error) error {
	var (
		done       int64 // segments up to this one were followed or skipped
		pausedSent bool  // the current pause was shown already
	)
	// look follows the latest segment or shows the stored run once; over
	// is set when the follow ends (with err).
	look := func() (over bool, err error) {
		wake, release := s.waker.wait(run.ID)
		defer release()
		info, ok, err := s.events.Latest(ctx, run.ID)
		if err != nil {
			return true, err
		}
		if ok && info.Segment > done && (!info.Ended || time.Since(info.EndedAt) < s.hub.Retain) {
			last, ended, err := s.followSegment(ctx, run, info.Segment, send)
			if err != nil {
				return true, err
			}
			done = info.Segment
			if ended {
				if last == nil || last.Name() != workflow.EventWorkflowPaused || !keepOpen {
					return true, nil
				}
				pausedSent = true
				return false, nil
			}
			// The segment's writer went away: the stored run says more.
		}
		if ok && info.Segment > done {
			done = info.Segment
		}
		if over, err := s.showStored(ctx, run, keepOpen, &pausedSent, send); over {
			return true, err
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-wake:
		case <-time.After(followPoll):
		}
		return false, nil
	}
	for {
		if over, err := look(); over {
			return err
		}
	}
}

// followSegment sends the stored events of one segment of run, in order,
// until its end. ended is false when the segment stopped growing while the
// stored run no longer runs (its writer is gone); last is the last event
// sent.
func (s *Service) followSegment(ctx context.Context, run *models.WorkflowRun, segment int64, send func(workflow.Event) error) (last workflow.Event, ended bool, err error) {
	var seq int64
	idle := 0
	for {
		wake, release := s.waker.wait(run.ID)
		rows, err := s.events.After(ctx, run.ID, segment, seq)
		if err != nil || len(rows) > 0 {
			release()
		}
		if err != nil {
			return last, false, err
		}
		for _, row := range rows {
			seq = row.Seq
			if row.End {
				return last, true, nil
			}
			ev, err := decodeStored(row.Event)
			if err != nil {
				return last, false, fmt.Errorf("run %s event %d/%d: %w", run.ID, segment, row.Seq, err)
			}
			last = ev
			if err := send(ev); err != nil {
				return last, false, err
			}
		}
		if len(rows) > 0 {
			idle = 0
			continue
		}
		select {
		case <-ctx.Done():
			release()
			return last, false, ctx.Err()
		case <-wake:
			release()
		case <-time.After(followPoll):
			release()
			if idle++; idle >= stalledPolls {
				stored, err := s.runs.Run(ctx, run.AppID, run.ID)
				if err != nil {
					return last, false, err
				}
				if stored.Status != workflowruns.StatusRunning {
					return last, false, nil
				}
				idle = 0
			}
		}
	}
}

// stalledPolls is how many quiet polls of a segment make a follower look
// whether the run still runs.
const stalledPolls = 3

// storedEvent is an event read back from the store that is sent as it
// was written.
type storedEvent struct {
	name string
	raw  json.RawMessage
}

func (e storedEvent) Name() string { return e.name }

func (e storedEvent) MarshalJSON() ([]byte, error) { return e.raw, nil }

// decodeStored turns a stored event back into an event. Text chunks are
// decoded (a chatflow's become message events, see clientEvent); the
// others are sent exactly as they were stored.
func decodeStored(raw json.RawMessage) (workflow.Event, error) {
	var head struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, err
	}
	if head.Event != workflow.EventTextChunk {
		return storedEvent{name: head.Event, raw: raw}, nil
	}
	var tc workflow.TextChunk
	if err := json.Unmarshal(raw, &tc); err != nil {
		return nil, err
	}
	return &tc, nil
}
