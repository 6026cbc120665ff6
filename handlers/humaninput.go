package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/apperr"
	"appkb/apps"
	"appkb/chat"
	"appkb/gen"
	"appkb/models"
	"appkb/workflow"
	"appkb/workflowruns"
)

// formView is the body of GET /form/human_input/{form_token}.
type formView struct {
	FormContent      string            `json:"form_content"`
	Inputs           []map[string]any  `json:"inputs"`
	ResolvedDefaults map[string]string `json:"resolved_default_values"`
	UserActions      []map[string]any  `json:"user_actions"`
	ExpirationTime   int64             `json:"expiration_time"`
}

func (r formView) VisitGetChatflowHumanInputFormResponse(w http.ResponseWriter) error {
	return kbJSON{r}.write(w)
}

// GetChatflowHumanInputForm serves GET /form/human_input/{form_token}: the
// form a paused run of the key's app waits on.
func (s *Server) GetChatflowHumanInputForm(ctx context.Context, req gen.GetChatflowHumanInputFormRequestObject) (gen.GetChatflowHumanInputFormResponseObject, error) {
	app, err := s.flowApp(ctx)
	if err != nil {
		return nil, err
	}
	form, err := s.flows.forms.Open(ctx, app.ID, req.FormToken)
	if err != nil {
		return nil, err
	}
	return formView{FormContent: form.Content, Inputs: form.Inputs, ResolvedDefaults: form.Defaults,
		UserActions: form.Actions, ExpirationTime: form.ExpiresAt}, nil
}

// SubmitChatflowHumanInputForm serves POST /form/human_input/{form_token}:
// the first valid answer wins and the run goes on in the background;
// GET /workflow/{id}/events follows it.
func (s *Server) SubmitChatflowHumanInputForm(ctx context.Context, req gen.SubmitChatflowHumanInputFormRequestObject) (gen.SubmitChatflowHumanInputFormResponseObject, error) {
	app, err := s.flowApp(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body.Inputs == nil {
		req.Body.Inputs = map[string]any{}
	}
	if err := s.flows.resumer.Submit(ctx, app.ID, req.FormToken, req.Body.User, req.Body.Action, req.Body.Inputs); err != nil {
		return nil, err
	}
	return gen.SubmitChatflowHumanInputForm200JSONResponse{}, nil
}

// flowApp is the key's app, which must be a workflow or a chatflow.
func (s *Server) flowApp(ctx context.Context) (*models.App, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	app, err := s.apps.Get(ctx, p.AppID)
	if err != nil {
		return nil, err
	}
	if !apps.UsesWorkflow(app.Mode) {
		return nil, notWorkflowApp()
	}
	return app, nil
}

// streamRunEvents serves GET /workflow/{workflow_run_id}/events. A run in
// progress is followed live from the start of its current segment; a
// paused run shows the forms it waits on and workflow_paused, and, with
// continue_on_pause, the stream stays open for what comes after the
// answer; a finished run gives its workflow_finished alone.
func (s *Server) streamRunEvents(c echo.Context, runID string, params gen.StreamWorkflowEventsParams) error {
	ctx := c.Request().Context()
	app, err := s.flowApp(ctx)
	if err != nil {
		return err
	}
	run, err := s.flows.runs.Run(ctx, app.ID, runID)
	if err != nil {
		return err
	}
	user, err := s.flows.users.Find(ctx, app.ID, params.User)
	if err != nil || run.EndUserID == nil || *run.EndUserID != user.ID {
		return apperr.NotFound("Workflow run not found.")
	}
	keepOpen := params.ContinueOnPause != nil && *params.ContinueOnPause
	chatflow := app.Mode == apps.ModeAdvancedChat

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	frames := make(chan any, 32)
	var followErr error
	go func() {
		defer close(frames)
		send := func(ev workflow.Event) error {
			select {
			case frames <- clientEvent(ev, chatflow):
				return nil
			case <-runCtx.Done():
				return runCtx.Err()
			}
		}
		if params.IncludeStateSnapshot != nil && *params.IncludeStateSnapshot {
			if followErr = s.replayNodes(runCtx, run, send); followErr != nil {
				return
			}
		}
		followErr = s.followRun(runCtx, run, keepOpen, send)
		if errors.Is(followErr, context.Canceled) {
			followErr = nil
		}
	}()
	return pumpFrames(c, s.pingInterval, cancel, frames, func() error { return followErr }, func(err error) any {
		e := apperr.From(err)
		return workflowError{Event: "error", TaskID: run.TaskID, WorkflowRunID: run.ID, Status: e.Status, Code: e.Code, Message: e.Message}
	})
}

// followRun sends the events of run until it ends, or pauses when keepOpen
// is false. Each segment of the run (its start, each resumption) is
// followed from the hub while the hub has it, otherwise the stored record
// tells where the run is.
func (s *Server) followRun(ctx context.Context, run *models.WorkflowRun, keepOpen bool, send func(workflow.Event) error) error {
	var after int64
	for {
		var last workflow.Event
		seq, found, err := s.flows.hub.Follow(ctx, run.ID, after, func(ev workflow.Event) error {
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
		} else {
			stored, err := s.flows.runs.Run(ctx, run.AppID, run.ID)
			if err != nil {
				return err
			}
			switch stored.Status {
			case workflowruns.StatusRunning:
				// Between segments: wait for the next one.
			case workflow.RunPaused:
				if err := s.sendPaused(ctx, stored, send); err != nil {
					return err
				}
				if !keepOpen {
					return nil
				}
			default:
				return send(finishedEvent(stored))
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.flows.hub.Next(run.ID, after):
		case <-time.After(time.Second):
			// Look at the stored record again.
		}
	}
}

// sendPaused sends the forms a stored paused run waits on, then
// workflow_paused.
func (s *Server) sendPaused(ctx context.Context, run *models.WorkflowRun, send func(workflow.Event) error) error {
	forms, err := s.flows.forms.Waiting(ctx, run.ID)
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
func (s *Server) replayNodes(ctx context.Context, run *models.WorkflowRun, send func(workflow.Event) error) error {
	execs, err := s.flows.runs.NodeExecutions(ctx, run.ID)
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
func clientEvent(ev workflow.Event, chatflow bool) any {
	tc, ok := ev.(*workflow.TextChunk)
	if !ok || !chatflow {
		return ev
	}
	return chat.MessageEvent{Event: chat.EventMessage, ID: tc.MessageID, Answer: tc.Data.Text, StreamBase: chat.StreamBase{
		TaskID: tc.TaskID, MessageID: tc.MessageID, ConversationID: tc.ConversationID, CreatedAt: tc.CreatedAt,
	}}
}
