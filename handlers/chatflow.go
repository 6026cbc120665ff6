package handlers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"appkb/apperr"
	"appkb/chat"
	"appkb/gen"
	"appkb/models"
	"appkb/workflow"
	"appkb/workflowruns"
)

// sendChatflowMessage serves POST /chat-messages for a chatflow
// (advanced-chat) app. The chat runtime keeps the conversation and the
// message; the workflow engine produces the answer. The graph is the app's
// current definition, or the published version the request's workflow_id
// names.
//
// A stream carries the engine's events as they happen, except that the
// text the answer nodes produce goes out as message events; after
// workflow_finished the turn is stored and the stream ends with one
// message_end, or with an error event when the run failed.
func (s *Server) sendChatflowMessage(c echo.Context, app *models.App, body *gen.ChatRequest) error {
	ctx := c.Request().Context()
	var (
		version *workflowruns.Version
		err     error
	)
	if id := valueOf(body.WorkflowId); id == "" {
		version, err = s.flows.runs.Current(ctx, app)
	} else if _, perr := uuid.Parse(id); perr != nil {
		return apperr.New(http.StatusBadRequest, apperr.CodeBadRequest, "Invalid workflow ID format.")
	} else {
		version, err = s.flows.runs.ByID(ctx, app.ID, id)
	}
	if err != nil {
		return err
	}
	turn, err := s.chat.PrepareChatflow(ctx, chat.Request{
		AppID:            app.ID,
		User:             body.User,
		Query:            body.Query,
		Inputs:           body.Inputs,
		ConversationID:   valueOf(body.ConversationId),
		AutoGenerateName: body.AutoGenerateName == nil || *body.AutoGenerateName,
		Streaming:        body.ResponseMode != nil && *body.ResponseMode == gen.ChatRequestResponseModeStreaming,
		Files:            fileRefs(body.Files),
	}, version.Def)
	if err != nil {
		return err
	}
	graph, err := workflow.Compile(version.Def.Workflow)
	if err != nil {
		return err
	}
	in := workflow.RunInput{
		Graph: graph, Mode: workflow.ModeChatflow, Inputs: turn.Inputs, Query: body.Query,
		UserID: body.User, AppID: app.ID, WorkflowID: version.ID,
		ConversationID: turn.ConversationID, MessageID: turn.MessageID,
		TaskID: turn.TaskID, RunID: uuid.NewString(),
		DialogueCount:         turn.DialogueCount,
		ConversationVariables: turn.ConversationVariables,
		History:               turn.History,
		Files:                 workflowFiles(turn.Files),
	}
	engine := s.flows.engine(workflowruns.RunMeta{EndUserID: turn.EndUserID})
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// Chat tasks are stopped by the user who started them only.
	defer s.flows.tasks.Track(turn.TaskID, app.ID, body.User, stop)()

	if !turn.Streaming {
		res, err := s.flows.run(runCtx, engine, in, nil)
		if err != nil {
			return err
		}
		failure := runFailure(res)
		md, err := turn.Finish(ctx, chatflowOutcome(res, failure))
		if failure != nil {
			return failure
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, turn.BlockingResponse(res.Answer, md))
	}
	return s.streamChatflow(c, runCtx, stop, engine, in, turn)
}

// spoken reports whether a run that ended with status has an answer worth
// reading aloud: it went through, not stopped, paused or failed.
func spoken(status string) bool {
	return status == workflow.RunSucceeded || status == workflow.RunPartialSucceeded
}

// runFailure is the error a failed run reports to the client. As in Dify,
// a run that failed (not one that was stopped) surfaces as invalid_param
// with the run's error text.
func runFailure(res *workflow.Result) error {
	if res.Status != workflow.RunFailed {
		return nil
	}
	msg := res.Error
	if msg == "" {
		msg = "The workflow run failed."
	}
	return apperr.New(http.StatusBadRequest, apperr.CodeInvalidParam, "%s", msg)
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

// streamChatflow runs the graph in its own goroutine and writes each event
// as one frame, pinging while nothing happens. As for workflow streams,
// the headers go out with the first frame, so a run refused before it
// starts (bad inputs) still answers with a plain JSON error, and frames
// are drained to the end even when the client has gone away. When the app
// auto-plays answers, the answer of a run that succeeded is spoken once
// it is stored: tts_message pieces, then message_end, then
// tts_message_end.
func (s *Server) streamChatflow(c echo.Context, ctx context.Context, cancel context.CancelCauseFunc, engine *workflow.Engine, in workflow.RunInput, turn *chat.ChatflowTurn) error {
	frames := make(chan any, 32)
	var runErr error
	go func() {
		defer close(frames)
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("chatflow: run panicked", "run", in.RunID, "panic", p)
				runErr = apperr.Internal(fmt.Errorf("chatflow run panicked: %v", p))
			}
		}()
		res, err := s.flows.run(ctx, engine, in, func(ev workflow.Event) {
			if tc, ok := ev.(*workflow.TextChunk); ok {
				frames <- turn.MessageEvent(tc.Data.Text)
				return
			}
			frames <- ev
		})
		if err != nil {
			runErr = err
			return
		}
		failure := runFailure(res)
		md, err := turn.Finish(ctx, chatflowOutcome(res, failure))
		switch {
		case failure != nil:
			frames <- turn.ErrorEvent(failure)
		case err != nil:
			frames <- turn.ErrorEvent(err)
		case res.Status == workflow.RunPaused:
			// The stream ends with workflow_paused; the run goes on once
			// its form is answered (GET /workflow/{id}/events follows it).
		default:
			end := turn.MessageEndEvent(md)
			var pieces []string
			if spoken(res.Status) {
				pieces = s.autoPlay(ctx, in.AppID, res.Answer)
			}
			base, _ := end.(chat.MessageEndEvent)
			for _, piece := range pieces {
				frames <- ttsEvent{Event: eventTTSMessage, StreamBase: base.StreamBase, Audio: piece}
			}
			frames <- end
			if len(pieces) > 0 {
				frames <- ttsEvent{Event: eventTTSMessageEnd, StreamBase: base.StreamBase}
			}
		}
	}()

	return pumpFrames(c, s.pingInterval, cancel, frames, func() error { return runErr },
		func(err error) any { return turn.ErrorEvent(err) })
}
