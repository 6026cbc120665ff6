package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"appkb/apperr"
	"appkb/apps"
	"appkb/chat"
	"appkb/endusers"
	"appkb/files"
	"appkb/gen"
	"appkb/models"
	"appkb/resumer"
	"appkb/tools"
	"appkb/workflow"
	"appkb/workflowruns"
)

// flows holds what workflow runs need besides the Server's own fields.
type flows struct {
	runs   *workflowruns.Store
	users  *endusers.Store
	models workflow.ModelSource
	// retriever answers knowledge-retrieval nodes.
	retriever workflow.Retriever
	// guard protects http-request nodes from reaching private addresses.
	guard *files.Guard
	// tasks is the chat runtime's registry, so that one task id space
	// covers every kind of generation.
	tasks *chat.Tasks
	// forms keeps the forms of human-input nodes; hub carries the events
	// of runs in progress to other requests; resumer continues paused
	// runs.
	forms   *workflowruns.Forms
	hub     *resumer.Hub
	resumer *resumer.Resumer
	python  workflow.CodeRunner
	tools   *tools.Registry
	// chat stores the answers of chatflow turns that resumed.
	chat *chat.Service
	// files holds the uploads that file variables point at.
	files *files.Store
	log   *slog.Logger
}

func newFlows(d Deps, models workflow.ModelSource, retriever workflow.Retriever, chatSvc *chat.Service, log *slog.Logger) *flows {
	runs := workflowruns.New(d.DB)
	tasks := chatSvc.Tasks()
	f := &flows{runs: runs, users: endusers.NewStore(d.DB), models: models, retriever: retriever,
		guard: &files.Guard{Allow: d.FetchAllow}, tasks: tasks, forms: runs.Forms(), hub: resumer.NewHub(),
		python: d.Python, files: remoteFiles(d), chat: chatSvc, log: log, tools: d.Tools}
	f.resumer = &resumer.Resumer{Runs: runs, Forms: f.forms, Engine: f.engine, Hub: f.hub, Log: log,
		Track: func(taskID, appID, user string, cancel context.CancelCauseFunc) func() {
			return tasks.Track(taskID, appID, user, cancel)
		}}
	f.resumer.Finished = f.finishChatflow
	if d.Background != nil {
		go f.resumer.ExpireLoop(d.Background, time.Minute)
	}
	return f
}

// finishChatflow stores the answer of a chatflow turn whose run paused
// and has now ended, and gives the event that ends the resumed stream.
func (f *flows) finishChatflow(ctx context.Context, def *apps.Definition, p *workflowruns.Paused, res *workflow.Result) []workflow.Event {
	if f.chat == nil || p.Run.MessageID == nil || p.Run.ConversationID == nil {
		return nil
	}
	out := chatflowOutcome(res, runFailure(res))
	ev, err := f.chat.FinishResumed(ctx, def, p.Run.TaskID, *p.Run.ConversationID, *p.Run.MessageID, out)
	if err != nil {
		f.log.Error("chatflow: storing a resumed answer failed", "run", res.RunID, "err", err)
		return nil
	}
	return []workflow.Event{chatEvent{ev}}
}

// chatEvent carries a chat stream event among a run's workflow events.
type chatEvent struct{ ev chat.Event }

func (c chatEvent) Name() string { return c.ev.EventName() }

func (c chatEvent) MarshalJSON() ([]byte, error) { return json.Marshal(c.ev) }

// run runs a graph for a request, publishing its events on the hub as
// well as to emit, and lets the resumer take up a run that paused.
func (f *flows) run(ctx context.Context, engine *workflow.Engine, in workflow.RunInput, emit func(workflow.Event)) (*workflow.Result, error) {
	seg := f.hub.Begin(in.RunID)
	defer seg.End()
	res, err := engine.Run(ctx, in, func(ev workflow.Event) {
		seg.Publish(ev)
		if emit != nil {
			emit(ev)
		}
	})
	if err == nil && res.Status == workflow.RunPaused {
		f.resumer.Paused(context.WithoutCancel(ctx), res)
	}
	return res, err
}

// engine is a workflow engine for one run, recording it for meta's end user.
func (f *flows) engine(meta workflowruns.RunMeta) *workflow.Engine {
	return &workflow.Engine{
		Models:    f.models,
		Retriever: f.retriever,
		Store:     f.runs.Recorder(meta),
		HTTPGuard: f.guard,
		Tools:     f.tools,
		Forms:     f.forms,
		Python:    f.python,
		Files:     f.files,
		Logger:    f.log,
	}
}

// workflowRequest is the body of the two run operations. It is decoded
// into plain values rather than gen.WorkflowExecutionRequest, whose inputs
// are a union type the engine has no use for.
type workflowRequest struct {
	Inputs       map[string]any `json:"inputs"`
	ResponseMode *string        `json:"response_mode"`
	User         string         `json:"user"`
	Files        []struct {
		Type           string `json:"type"`
		TransferMethod string `json:"transfer_method"`
		URL            string `json:"url"`
		UploadFileID   string `json:"upload_file_id"`
	} `json:"files"`
}

// workflowBlocking is the answer of a blocking run (WorkflowBlockingResponse).
type workflowBlocking struct {
	TaskID        string                        `json:"task_id"`
	WorkflowRunID string                        `json:"workflow_run_id"`
	Data          workflow.WorkflowFinishedData `json:"data"`
}

// workflowError is the error event of a workflow stream (StreamEventError).
type workflowError struct {
	Event         string `json:"event"`
	TaskID        string `json:"task_id"`
	WorkflowRunID string `json:"workflow_run_id"`
	Status        int    `json:"status"`
	Code          string `json:"code"`
	Message       string `json:"message"`
}

func notWorkflowApp() error {
	return apperr.New(http.StatusBadRequest, apperr.CodeNotWorkflowApp, "Please check if your app mode matches the right API route.")
}

// ExecuteWorkflow serves POST /workflows/run (the app's current
// definition) through the raw router; see api in server.go.
func (s *Server) ExecuteWorkflow(context.Context, gen.ExecuteWorkflowRequestObject) (gen.ExecuteWorkflowResponseObject, error) {
	return nil, apperr.Internal(errors.New("POST /workflows/run is served by the raw handler"))
}

// RunWorkflowById is the strict form of POST /workflows/{workflow_id}/run,
// served by runWorkflow instead.
func (s *Server) RunWorkflowById(context.Context, gen.RunWorkflowByIdRequestObject) (gen.RunWorkflowByIdResponseObject, error) {
	return nil, apperr.Internal(errors.New("POST /workflows/{workflow_id}/run is served by the raw handler"))
}

// runWorkflow serves both run operations: versionID empty runs the app's
// definition as stored now, otherwise that recorded version. A blocking
// request gets the finished run as JSON, a streaming one every engine
// event as it happens.
func (s *Server) runWorkflow(c echo.Context, versionID string) error {
	ctx := c.Request().Context()
	p, err := principalFrom(ctx)
	if err != nil {
		return err
	}
	var body workflowRequest
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	app, err := s.apps.Get(ctx, p.AppID)
	if err != nil {
		return err
	}
	if app.Mode != apps.ModeWorkflow {
		return notWorkflowApp()
	}
	var version *workflowruns.Version
	if versionID == "" {
		version, err = s.flows.runs.Current(ctx, app)
	} else if _, perr := uuid.Parse(versionID); perr != nil {
		return apperr.New(http.StatusBadRequest, apperr.CodeBadRequest, "Invalid workflow ID format.")
	} else {
		version, err = s.flows.runs.ByID(ctx, app.ID, versionID)
	}
	if err != nil {
		return err
	}
	user, err := s.flows.users.Resolve(ctx, app.ID, body.User)
	if err != nil {
		return err
	}
	refs := make([]chat.FileRef, len(body.Files))
	for i, f := range body.Files {
		refs[i] = chat.FileRef{Type: f.Type, TransferMethod: f.TransferMethod, URL: f.URL, UploadFileID: f.UploadFileID}
	}
	attached, err := attachedFiles(s.flows.files)(ctx, app.ID, user.ID, refs)
	if err != nil {
		return err
	}
	graph, err := workflow.Compile(version.Def.Workflow)
	if err != nil {
		return err
	}
	in := workflow.RunInput{
		Graph: graph, Mode: workflow.ModeWorkflow, Inputs: body.Inputs, Files: workflowFiles(attached),
		UserID: body.User, AppID: app.ID, WorkflowID: version.ID,
		TaskID: uuid.NewString(), RunID: uuid.NewString(),
	}
	engine := s.flows.engine(workflowruns.RunMeta{EndUserID: user.ID})
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer s.flows.tasks.Track(in.TaskID, app.ID, body.User, stop)()

	if body.ResponseMode == nil || *body.ResponseMode != string(gen.WorkflowExecutionRequestResponseModeStreaming) {
		var end *workflow.WorkflowFinished
		res, err := s.flows.run(runCtx, engine, in, func(ev workflow.Event) {
			if f, ok := ev.(*workflow.WorkflowFinished); ok {
				end = f
			}
		})
		if err != nil {
			return err
		}
		if res.Status == workflow.RunPaused {
			// A paused run answers with what it has so far.
			return c.JSON(http.StatusOK, workflowBlocking{TaskID: in.TaskID, WorkflowRunID: in.RunID, Data: workflow.WorkflowFinishedData{
				ID: in.RunID, WorkflowID: in.WorkflowID, Status: res.Status, Outputs: map[string]any{},
				ElapsedTime: res.ElapsedTime, TotalTokens: res.TotalTokens, TotalSteps: res.TotalSteps,
				CreatedAt: res.Snapshot.CreatedAt, Files: []any{},
			}})
		}
		if end == nil {
			return apperr.Internal(errors.New("workflow run ended without workflow_finished"))
		}
		return c.JSON(http.StatusOK, workflowBlocking{TaskID: in.TaskID, WorkflowRunID: in.RunID, Data: end.Data})
	}
	return s.streamWorkflow(c, runCtx, stop, engine, in)
}

// streamWorkflow runs the engine in its own goroutine and writes each
// event as one frame, with a ping whenever the stream was quiet for
// pingInterval. The headers go out with the first event, so that a run
// refused before it starts (bad inputs) still gets a plain JSON error.
// Events are always drained, even after the client went away (which
// cancels the run), so the engine never blocks on a dead stream.
//
// When the app auto-plays, the output of a run that went through is
// spoken after workflow_finished (which the engine sends itself): its
// tts_message pieces, then tts_message_end. The spoken text is what the
// text_chunk events carried or, when there were none, the run's outputs
// (see spokenOutputs).
func (s *Server) streamWorkflow(c echo.Context, ctx context.Context, cancel context.CancelCauseFunc, engine *workflow.Engine, in workflow.RunInput) error {
	events := make(chan any, 32)
	var runErr error
	go func() {
		defer close(events)
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("workflow: run panicked", "run", in.RunID, "panic", p)
				runErr = apperr.Internal(fmt.Errorf("workflow run panicked: %v", p))
			}
		}()
		var text strings.Builder
		res, err := s.flows.run(ctx, engine, in, func(ev workflow.Event) {
			if tc, ok := ev.(*workflow.TextChunk); ok {
				text.WriteString(tc.Data.Text)
			}
			events <- ev
		})
		if err != nil {
			runErr = err
			return
		}
		if !spoken(res.Status) {
			return
		}
		said := text.String()
		if strings.TrimSpace(said) == "" {
			said = spokenOutputs(res.Outputs)
		}
		pieces := s.autoPlay(ctx, in.AppID, said)
		if len(pieces) == 0 {
			return
		}
		for _, piece := range pieces {
			events <- workflowTTS{Event: eventTTSMessage, TaskID: in.TaskID, WorkflowRunID: in.RunID,
				CreatedAt: time.Now().Unix(), Audio: piece}
		}
		events <- workflowTTS{Event: eventTTSMessageEnd, TaskID: in.TaskID, WorkflowRunID: in.RunID,
			CreatedAt: time.Now().Unix()}
	}()

	return pumpFrames(c, s.pingInterval, cancel, events, func() error { return runErr }, func(err error) any {
		e := apperr.From(err)
		return workflowError{Event: "error", TaskID: in.TaskID, WorkflowRunID: in.RunID,
			Status: e.Status, Code: e.Code, Message: e.Message}
	})
}

// StopWorkflowTaskGeneration serves POST /workflows/tasks/{task_id}/stop.
// As the contract says, any user of the app may stop a run; stopping a
// task that is unknown or already over quietly succeeds.
func (s *Server) StopWorkflowTaskGeneration(ctx context.Context, req gen.StopWorkflowTaskGenerationRequestObject) (gen.StopWorkflowTaskGenerationResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil || strings.TrimSpace(req.Body.User) == "" {
		return nil, apperr.InvalidParam("user is required")
	}
	app, err := s.apps.Get(ctx, p.AppID)
	if err != nil {
		return nil, err
	}
	if app.Mode != apps.ModeWorkflow {
		return nil, notWorkflowApp()
	}
	s.flows.tasks.StopAnyUser(app.ID, req.TaskId)
	return gen.StopWorkflowTaskGeneration200JSONResponse{Result: "success"}, nil
}

// GetWorkflowRunDetail serves GET /workflows/run/{workflow_run_id}.
func (s *Server) GetWorkflowRunDetail(ctx context.Context, req gen.GetWorkflowRunDetailRequestObject) (gen.GetWorkflowRunDetailResponseObject, error) {
	app, err := s.flowApp(ctx)
	if err != nil {
		return nil, err
	}
	run, err := s.flows.runs.Run(ctx, app.ID, req.WorkflowRunId)
	if err != nil {
		return nil, err
	}
	out := gen.GetWorkflowRunDetail200JSONResponse{
		Id: run.ID, WorkflowId: run.WorkflowID, Status: run.Status, CreatedAt: run.CreatedAt.Unix(),
		Inputs: &run.Inputs, Error: run.Error, TotalSteps: &run.TotalSteps, TotalTokens: &run.TotalTokens,
		ElapsedTime: elapsed(run.ElapsedTime), FinishedAt: unixOrNil(run.FinishedAt),
	}
	outputs := map[string]any{}
	if run.Outputs != nil {
		if err := json.Unmarshal([]byte(*run.Outputs), &outputs); err != nil {
			return nil, fmt.Errorf("run %s: stored outputs: %w", run.ID, err)
		}
	}
	out.Outputs = &outputs
	return out, nil
}

// GetWorkflowLogs serves GET /workflows/logs.
func (s *Server) GetWorkflowLogs(ctx context.Context, req gen.GetWorkflowLogsRequestObject) (gen.GetWorkflowLogsResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	if valueOf(q.CreatedByAccount) != "" {
		// appkb has no console accounts, so no run was started by one.
		return nil, apperr.InvalidParam("Account %s not found.", *q.CreatedByAccount)
	}
	f := workflowruns.LogFilter{
		Keyword: valueOf(q.Keyword), Status: string(valueOf(q.Status)),
		Before: q.CreatedAtBefore, After: q.CreatedAtAfter, SessionID: valueOf(q.CreatedByEndUserSessionId),
		Page: 1, Limit: 20,
	}
	if q.Page != nil {
		f.Page = *q.Page
	}
	if q.Limit != nil {
		f.Limit = *q.Limit
	}
	entries, total, err := s.flows.runs.Logs(ctx, p.AppID, f)
	if err != nil {
		return nil, err
	}
	out := gen.GetWorkflowLogs200JSONResponse{Page: f.Page, Limit: f.Limit, Total: total,
		HasMore: f.Page*f.Limit < total, Data: make([]gen.WorkflowLogItem, 0, len(entries))}
	for _, e := range entries {
		out.Data = append(out.Data, logItem(e))
	}
	return out, nil
}

// logItem is the log entry of one run. appkb keeps no separate log table,
// so the entry's id is derived from the run's.
func logItem(e workflowruns.LogEntry) gen.WorkflowLogItem {
	r := e.Run
	from, role := r.CreatedFrom, "end_user"
	item := gen.WorkflowLogItem{
		Id:            uuid.NewSHA1(uuid.NameSpaceOID, []byte("workflow-app-log:"+r.ID)).String(),
		CreatedAt:     r.CreatedAt.Unix(),
		CreatedFrom:   &from,
		CreatedByRole: &role,
		WorkflowRun: &gen.WorkflowRunSummary{
			Id: r.ID, Version: &e.Version, Status: r.Status, Error: r.Error,
			ElapsedTime: elapsed(r.ElapsedTime), TotalTokens: &r.TotalTokens, TotalSteps: &r.TotalSteps,
			CreatedAt: r.CreatedAt.Unix(), FinishedAt: unixOrNil(r.FinishedAt),
			ExceptionsCount: &r.ExceptionsCount, TriggeredFrom: &r.TriggeredFrom,
		},
	}
	if e.EndUser != nil {
		item.CreatedByEndUser = endUserSummary(e.EndUser)
	}
	return item
}

func endUserSummary(u *models.EndUser) *gen.EndUserSummary {
	typ, anon, session := u.Type, u.IsAnonymous, u.SessionID
	return &gen.EndUserSummary{Id: u.ID, Type: &typ, IsAnonymous: &anon, SessionId: &session}
}

func elapsed(sec float64) *float32 {
	f := float32(sec)
	return &f
}

func unixOrNil(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	u := t.Unix()
	return &u
}

// StreamWorkflowEvents is the strict form of GET
// /workflow/{workflow_run_id}/events, served by streamRunEvents instead.
func (s *Server) StreamWorkflowEvents(context.Context, gen.StreamWorkflowEventsRequestObject) (gen.StreamWorkflowEventsResponseObject, error) {
	return nil, apperr.Internal(errors.New("GET /workflow/{workflow_run_id}/events is served by the raw handler"))
}
