package flows

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/chat"
	"appkb/internal/run/workflow"
	"appkb/internal/run/workflowruns"
	"appkb/models"
)

// WorkflowBlocking is the answer of a blocking workflow run
// (WorkflowBlockingResponse).
type WorkflowBlocking struct {
	TaskID        string                        `json:"task_id"`
	WorkflowRunID string                        `json:"workflow_run_id"`
	Data          workflow.WorkflowFinishedData `json:"data"`
}

// WorkflowError is the error event of a workflow stream (StreamEventError).
type WorkflowError struct {
	Event         string `json:"event"`
	TaskID        string `json:"task_id"`
	WorkflowRunID string `json:"workflow_run_id"`
	Status        int    `json:"status"`
	Code          string `json:"code"`
	Message       string `json:"message"`
}

func workflowError(taskID, runID string) func(error) any {
	return func(err error) any {
		e := apperr.From(err)
		return WorkflowError{Event: "error", TaskID: taskID, WorkflowRunID: runID, Status: e.Status, Code: e.Code, Message: e.Message}
	}
}

// chatEvent carries a chat stream event among a run's workflow events
// (the end of a resumed chatflow turn, published on the hub).
type chatEvent struct{ ev chat.Event }

func (c chatEvent) Name() string { return c.ev.EventName() }

func (c chatEvent) MarshalJSON() ([]byte, error) { return json.Marshal(c.ev) }

// execute runs a graph, publishing its events on the hub as well as to
// emit, and lets the resumer take up a run that paused.
func (s *Service) execute(ctx context.Context, engine *workflow.Engine, in workflow.RunInput, emit func(workflow.Event)) (*workflow.Result, error) {
	seg := s.hub.BeginRun(in.RunID)
	defer seg.End()
	res, err := engine.Run(ctx, in, func(ev workflow.Event) {
		seg.Publish(ev)
		if emit != nil {
			emit(ev)
		}
	})
	if err == nil && res.Status == workflow.RunPaused {
		s.resumer.Paused(context.WithoutCancel(ctx), res)
	}
	return res, err
}

// Workflow starts a run of a workflow app: its current definition, or the
// recorded version req.WorkflowID. A blocking run's Result.Body is the
// finished run (or, for a run that paused, what it has so far). A
// streaming run gives every engine event as it happens and, when the app
// auto-plays, the speech of a run that went through after
// workflow_finished: the text its text_chunk events carried or, when
// there were none, its text outputs.
func (s *Service) Workflow(ctx context.Context, req Request) (*Run, error) {
	app, err := s.apps.Cached(ctx, req.AppID)
	if err != nil {
		return nil, err
	}
	if app.Mode != apps.ModeWorkflow {
		return nil, NotWorkflowApp()
	}
	version, err := s.version(ctx, app, req.WorkflowID)
	if err != nil {
		return nil, err
	}
	user, err := s.users.Resolve(ctx, app.ID, req.User)
	if err != nil {
		return nil, err
	}
	attached, err := AttachedFiles(s.cfg.Files)(ctx, app.ID, user.ID, req.Files)
	if err != nil {
		return nil, err
	}
	in, err := s.withGraph(version, workflow.RunInput{
		Mode: workflow.ModeWorkflow, Inputs: req.Inputs, Files: WorkflowFiles(attached),
		UserID: req.User, AppID: app.ID, TaskID: uuid.NewString(), RunID: models.NewID(),
	})
	if err != nil {
		return nil, err
	}
	// A blocking run's rows are committed together at its end: nobody
	// sees its events (see RunMeta.Blocking).
	rec := s.runs.Recorder(workflowruns.RunMeta{EndUserID: user.ID, Blocking: !req.Streaming})
	engine := s.engineOn(rec)
	return s.launch(ctx, in.TaskID, workflowError(in.TaskID, in.RunID), func(ctx context.Context, r *Run) (*Result, error) {
		defer s.tasks.Track(in.TaskID, app.ID, req.User, r.cancel)()
		defer s.flushRun(ctx, rec, in.RunID)
		var (
			end  *workflow.WorkflowFinished
			text strings.Builder
		)
		res, err := s.execute(ctx, engine, in, func(ev workflow.Event) {
			switch e := ev.(type) {
			case *workflow.WorkflowFinished:
				end = e
			case *workflow.TextChunk:
				text.WriteString(e.Data.Text)
			}
			if req.Streaming {
				_ = r.emit(workflowEv(ev))
			}
		})
		if err != nil {
			return nil, err
		}
		said := text.String()
		if strings.TrimSpace(said) == "" {
			said = TextOutputs(res.Outputs)
		}
		out := &Result{TaskID: in.TaskID, WorkflowRunID: in.RunID, Mode: app.Mode, Status: res.Status,
			Answer: said, Outputs: res.Outputs, TotalTokens: res.TotalTokens, Failure: runFailure(res)}
		switch {
		case res.Status == workflow.RunPaused:
			// A paused run answers with what it has so far.
			out.Body = WorkflowBlocking{TaskID: in.TaskID, WorkflowRunID: in.RunID, Data: workflow.WorkflowFinishedData{
				ID: in.RunID, WorkflowID: in.WorkflowID, Status: res.Status, Outputs: map[string]any{},
				ElapsedTime: res.ElapsedTime, TotalTokens: res.TotalTokens, TotalSteps: res.TotalSteps,
				CreatedAt: res.Snapshot.CreatedAt, Files: []any{},
			}}
		case end != nil:
			out.Body = WorkflowBlocking{TaskID: in.TaskID, WorkflowRunID: in.RunID, Data: end.Data}
		case !req.Streaming:
			return nil, apperr.Internal(errors.New("workflow run ended without workflow_finished"))
		}
		if req.Streaming && spoken(res.Status) {
			s.speakWorkflow(ctx, r, in, said)
		}
		return out, nil
	}), nil
}

// withGraph returns in with the compiled graph of version and its id.
func (s *Service) withGraph(version *workflowruns.Version, in workflow.RunInput) (workflow.RunInput, error) {
	graph, err := s.runs.Graph(version)
	in.Graph, in.WorkflowID = graph, version.ID
	return in, err
}

// chatflow starts a chatflow turn: the conversation is prepared by the
// chat runtime, the graph answers. The text the answer nodes produce goes
// out as message events; after workflow_finished the turn is stored and
// the stream ends with one message_end, or with an error event when the
// run failed. When the app auto-plays answers, the answer of a run that
// succeeded is spoken once it is stored: tts_message pieces, then
// message_end, then tts_message_end. Chat tasks are stopped by the user
// who started them only.
func (s *Service) chatflow(ctx context.Context, app *models.App, req Request) (*Run, error) {
	version, err := s.version(ctx, app, req.WorkflowID)
	if err != nil {
		return nil, err
	}
	turn, err := s.chat.PrepareChatflow(ctx, req.Request, version.Def)
	if err != nil {
		return nil, err
	}
	in, err := s.withGraph(version, workflow.RunInput{
		Mode: workflow.ModeChatflow, Inputs: turn.Inputs, Query: req.Query, UserID: req.User, AppID: app.ID,
		ConversationID: turn.ConversationID, MessageID: turn.MessageID,
		TaskID: turn.TaskID, RunID: models.NewID(),
		DialogueCount:         turn.DialogueCount,
		ConversationVariables: turn.ConversationVariables,
		History:               turn.History,
		Files:                 WorkflowFiles(turn.Files),
	})
	if err != nil {
		return nil, err
	}
	// A blocking turn's run is stored with its message rather than step
	// by step: nobody sees its events (see RunMeta.Blocking).
	rec := s.runs.Recorder(workflowruns.RunMeta{EndUserID: turn.EndUserID, Blocking: !turn.Streaming})
	engine := s.engineOn(rec)
	errorEvent := func(err error) any { return turn.ErrorEvent(err) }
	return s.launch(ctx, turn.TaskID, errorEvent, func(ctx context.Context, r *Run) (*Result, error) {
		defer s.tasks.Track(turn.TaskID, app.ID, req.User, r.cancel)()
		// Whatever the run queued is committed by then (Finish queues
		// after it and waits), unless Finish was not reached.
		defer s.flushRun(ctx, rec, in.RunID)
		var emit func(workflow.Event)
		if turn.Streaming {
			emit = func(ev workflow.Event) {
				if tc, ok := ev.(*workflow.TextChunk); ok {
					_ = r.emit(chatEv(turn.MessageEvent(tc.Data.Text)))
					return
				}
				_ = r.emit(workflowEv(ev))
			}
		}
		res, err := s.execute(ctx, engine, in, emit)
		if err != nil {
			return nil, err
		}
		failure := runFailure(res)
		md, err := turn.Finish(ctx, chatflowOutcome(res, failure))
		out := &Result{TaskID: turn.TaskID, MessageID: turn.MessageID, ConversationID: turn.ConversationID,
			WorkflowRunID: in.RunID, Mode: app.Mode, Status: res.Status, Answer: res.Answer,
			Outputs: res.Outputs, TotalTokens: res.TotalTokens, Failure: failure}
		if !turn.Streaming {
			if failure != nil {
				return nil, failure
			}
			if err != nil {
				return nil, err
			}
			out.Body = turn.BlockingResponse(res.Answer, md)
			return out, nil
		}
		switch {
		case failure != nil:
			_ = r.emit(chatEv(turn.ErrorEvent(failure)))
		case err != nil:
			_ = r.emit(chatEv(turn.ErrorEvent(err)))
		case res.Status == workflow.RunPaused:
			// The stream ends with workflow_paused; the run goes on once
			// its form is answered (Follow shows what comes next).
		default:
			end := turn.MessageEndEvent(md)
			var pieces []string
			if spoken(res.Status) {
				pieces = s.autoPlay(ctx, in.AppID, res.Answer)
			}
			base, _ := end.(chat.MessageEndEvent)
			s.speakAround(r, pieces, base.StreamBase, chatEv(end))
		}
		return out, nil
	}), nil
}

// flushRun waits for the rows a blocking run queued, before its request
// answers; a failure is logged, as the engine logs one of a run's end.
func (s *Service) flushRun(ctx context.Context, rec *workflowruns.Recorder, runID string) {
	if err := rec.Flush(context.WithoutCancel(ctx)); err != nil {
		s.log.Error("workflow: recording a run failed", "run", runID, "err", err)
	}
}

// runFailure is the error a failed chatflow run reports to the client. As
// in Dify, a run that failed (not one that was stopped), whatever failed
// inside it (a code node, a refused http-request node, a model call),
// surfaces as 400 invalid_param whose message is "Run failed: " and the
// run's error text: in the error event of a stream, and as the answer of
// a blocking request. (A workflow app's blocking run instead answers 200
// with the failed run.)
func runFailure(res *workflow.Result) error {
	if res.Status != workflow.RunFailed {
		return nil
	}
	msg := res.Error
	if msg == "" {
		msg = "The workflow run failed."
	}
	return apperr.Fail(apperr.CodeInvalidParam, "Run failed: %s", msg)
}

// chatflowOutcome is what a turn stores of a finished run.
func chatflowOutcome(res *workflow.Result, failure error) chat.ChatflowOutcome {
	return chat.ChatflowOutcome{
		Answer:                res.Answer,
		TotalTokens:           res.TotalTokens,
		Elapsed:               time.Duration(res.ElapsedTime * float64(time.Second)),
		WorkflowRunID:         res.RunID,
		Err:                   failure,
		ConversationVariables: res.ConversationVariables,
	}
}

// finishChatflow stores the answer of a chatflow turn whose run paused
// and has now ended, and gives the event that ends the resumed stream.
func (s *Service) finishChatflow(ctx context.Context, def *apps.Definition, p *workflowruns.Paused, res *workflow.Result) []workflow.Event {
	if p.Run.MessageID == nil || p.Run.ConversationID == nil {
		return nil
	}
	out := chatflowOutcome(res, runFailure(res))
	ev, err := s.chat.FinishResumed(ctx, def, p.Run.TaskID, *p.Run.ConversationID, *p.Run.MessageID, out)
	if err != nil {
		s.log.Error("chatflow: storing a resumed answer failed", "run", res.RunID, "err", err)
		return nil
	}
	return []workflow.Event{chatEvent{ev}}
}
