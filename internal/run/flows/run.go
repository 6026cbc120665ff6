package flows

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/chat"
	"appkb/internal/run/workflow"
)

// Op names the operation a Request is for; it decides which app modes are
// accepted and the shape of the answer.
type Op int

const (
	// OpAuto runs the app the way its mode calls for: chat, agent and
	// chatflow apps as a chat message, text generators as a completion,
	// workflow apps as a workflow run.
	OpAuto Op = iota
	// OpChat is POST /chat-messages: chat, agent and chatflow apps.
	OpChat
	// OpCompletion is POST /completion-messages: text generators.
	OpCompletion
	// OpWorkflow is POST /workflows/run: workflow apps.
	OpWorkflow
)

// Request asks for one run of an app: the chat runtime's request (app,
// user, query, inputs, files, conversation, streaming, and the history,
// instructions and parameters of stateless callers), which chat and
// completion answers and chatflow turns are given as it is, plus what
// only flows reads. Chatflows use History when no stored conversation is
// continued; workflow runs read AppID, User, Inputs, Files and Streaming.
type Request struct {
	chat.Request
	Op Op
	// WorkflowID runs a recorded workflow version instead of the app's
	// current definition (chatflows and workflow apps).
	WorkflowID string
}

// Event is one frame of a run's stream.
type Event struct {
	// Name is the event's name, the "event" field of its payload.
	Name string
	// Delta is the answer text this event adds, if any: the piece of a
	// chat answer, a chatflow answer node's text or a workflow text_chunk.
	Delta string
	// Payload is the frame's value; its JSON encoding is exactly the
	// payload of one Server-Sent Events frame of the Service API. It is a
	// chat.Event, a workflow.Event or one of this package's TTS events.
	Payload any
}

// chatEv wraps a chat runtime event.
func chatEv(e chat.Event) Event {
	ev := Event{Name: e.EventName(), Payload: e}
	if m, ok := e.(chat.MessageEvent); ok {
		ev.Delta = m.Answer
	}
	return ev
}

// workflowEv wraps an engine event.
func workflowEv(e workflow.Event) Event {
	ev := Event{Name: e.Name(), Payload: e}
	if tc, ok := e.(*workflow.TextChunk); ok {
		ev.Delta = tc.Data.Text
	}
	return ev
}

// Result is how a run ended.
type Result struct {
	TaskID         string
	MessageID      string
	ConversationID string
	WorkflowRunID  string
	// Mode is the app's mode.
	Mode string
	// Status is the run's status for workflow runs (succeeded, failed,
	// stopped, paused…); chat answers leave it empty.
	Status string
	// Answer is the answer of a chat, completion or chatflow; for a
	// workflow run, the text its outputs would be read aloud as.
	Answer string
	// Outputs are a workflow run's outputs.
	Outputs map[string]any
	// Stopped is set when a stop request ended a chat answer early.
	Stopped     bool
	TotalTokens int
	// PromptTokens and CompletionTokens split TotalTokens for chat and
	// completion answers; runs of graphs count the total only.
	PromptTokens, CompletionTokens int
	// FinishReason is why the model ended a chat or completion answer
	// ("stop", "length"…), when it said.
	FinishReason string
	// Citations are the knowledge chunks a chat answer cites.
	Citations []chat.RetrieverResource
	// Failure is the error of a chatflow or workflow run that failed (its
	// blocking answer or stream already reports it in the API's shape).
	Failure error
	// Body is the JSON body of the blocking answer of the Service API.
	Body any
}

// Run is a run in progress. Its producer goroutine owns the run; the
// consumer reads Events (or calls Wait) until the channel is closed.
type Run struct {
	// TaskID is the id a stop request names.
	TaskID string

	// ctx is the run's work; cancel ends it (a stop request, or the
	// consumer going away). parent is the caller's context.
	ctx, parent context.Context
	cancel      context.CancelCauseFunc
	// gone is closed when the consumer cancelled: events are dropped
	// from then on.
	gone       chan struct{}
	goneOnce   sync.Once
	events     chan Event
	res        *Result
	err        error
	errSent    bool // err was already delivered as an event
	errorEvent func(error) any
}

// Events delivers the run's events; it is closed when the run has ended.
// A consumer must read it to the end (or cancel the run), or the producer
// waits.
func (r *Run) Events() <-chan Event { return r.events }

// Err is how the run ended, once Events is closed: nil, or an error the
// stream has not reported yet (see ErrorEvent).
func (r *Run) Err() error {
	if r.errSent {
		return nil
	}
	return r.err
}

// ErrorEvent is the stream's error frame for err.
func (r *Run) ErrorEvent(err error) any { return r.errorEvent(err) }

// Cancel ends the run early with cause because the consumer went away:
// the run stops and its remaining events are dropped.
func (r *Run) Cancel(cause error) {
	r.goneOnce.Do(func() { close(r.gone) })
	r.cancel(cause)
}

// Wait drains the events and returns the run's result.
func (r *Run) Wait() (*Result, error) {
	for range r.events {
	}
	if r.err != nil {
		return nil, r.err
	}
	return r.res, nil
}

// emit hands ev to the consumer. It fails, dropping the event, once the
// consumer has gone (Cancel, or the caller's context ended); a stop
// request does not drop events, so the run can report how it ended.
func (r *Run) emit(ev Event) error {
	select {
	case r.events <- ev:
		return nil
	case <-r.gone:
		return context.Canceled
	case <-r.parent.Done():
		return r.parent.Err()
	}
}

// launch starts body in the run's producer goroutine (see Produce).
func (s *Service) launch(parent context.Context, taskID string, errorEvent func(error) any,
	body func(ctx context.Context, r *Run) (*Result, error)) *Run {
	return start(parent, s.log, taskID, errorEvent, body)
}

// Produce starts a run whose events come from produce, for producers
// outside this package (and tests of stream writers). produce runs in the
// run's goroutine, which recovers a panic into an internal error and
// closes Events when produce returns; emit hands an event to the consumer
// and fails once the consumer has gone. errorEvent builds the stream's
// error frame.
func Produce(ctx context.Context, log *slog.Logger, taskID string, errorEvent func(error) any,
	produce func(ctx context.Context, emit func(Event) error) (*Result, error)) *Run {
	return start(ctx, log, taskID, errorEvent, func(ctx context.Context, r *Run) (*Result, error) {
		return produce(ctx, r.emit)
	})
}

func start(parent context.Context, log *slog.Logger, taskID string, errorEvent func(error) any,
	body func(ctx context.Context, r *Run) (*Result, error)) *Run {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancelCause(parent)
	r := &Run{TaskID: taskID, ctx: ctx, parent: parent, cancel: cancel, gone: make(chan struct{}),
		events: make(chan Event, 32), errorEvent: errorEvent}
	go func() {
		defer close(r.events)
		defer cancel(nil)
		defer func() {
			if p := recover(); p != nil {
				log.Error("run panicked", "task_id", taskID, "panic", p, "stack", string(debug.Stack()))
				r.err = apperr.Internal(fmt.Errorf("run panicked: %v", p))
				r.errSent = false
			}
		}()
		r.res, r.err = body(ctx, r)
	}()
	return r
}

// Run starts req as its Op says; OpAuto follows the app's mode.
func (s *Service) Run(ctx context.Context, req Request) (*Run, error) {
	switch req.Op {
	case OpChat:
		return s.Chat(ctx, req)
	case OpCompletion:
		return s.Completion(ctx, req)
	case OpWorkflow:
		return s.Workflow(ctx, req)
	}
	app, err := s.apps.Cached(ctx, req.AppID)
	if err != nil {
		return nil, err
	}
	switch app.Mode {
	case apps.ModeCompletion:
		return s.Completion(ctx, req)
	case apps.ModeWorkflow:
		return s.Workflow(ctx, req)
	}
	return s.Chat(ctx, req)
}
