package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/platform/apperr"
	"appkb/internal/run/chat"
	"appkb/internal/run/flows"
	"appkb/internal/run/workflowruns"
	"appkb/models"
)

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
	return startRun(s, c, s.flows.Workflow, func(body *workflowRequest) flows.Request {
		refs := make([]chat.FileRef, len(body.Files))
		for i, f := range body.Files {
			refs[i] = chat.FileRef{Type: f.Type, TransferMethod: f.TransferMethod, URL: f.URL, UploadFileID: f.UploadFileID}
		}
		return flows.Request{WorkflowID: versionID, Request: chat.Request{
			User: body.User, Inputs: body.Inputs, Files: refs,
			Streaming: body.ResponseMode != nil && *body.ResponseMode == string(gen.WorkflowExecutionRequestResponseModeStreaming),
		}}
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
	user := ""
	if req.Body != nil {
		user = strings.TrimSpace(req.Body.User)
	}
	if err := s.flows.StopWorkflow(ctx, p.AppID, user, req.TaskId); err != nil {
		return nil, err
	}
	return gen.StopWorkflowTaskGeneration200JSONResponse{Result: "success"}, nil
}

// GetWorkflowRunDetail serves GET /workflows/run/{workflow_run_id}.
func (s *Server) GetWorkflowRunDetail(ctx context.Context, req gen.GetWorkflowRunDetailRequestObject) (gen.GetWorkflowRunDetailResponseObject, error) {
	app, err := s.flowApp(ctx)
	if err != nil {
		return nil, err
	}
	run, err := s.flows.Runs().Run(ctx, app.ID, req.WorkflowRunId)
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
	if wire.ValueOf(q.CreatedByAccount) != "" {
		// appkb has no console accounts, so no run was started by one.
		return nil, apperr.InvalidParam("Account %s not found.", *q.CreatedByAccount)
	}
	f := workflowruns.LogFilter{
		Keyword: wire.ValueOf(q.Keyword), Status: string(wire.ValueOf(q.Status)),
		Before: q.CreatedAtBefore, After: q.CreatedAtAfter, SessionID: wire.ValueOf(q.CreatedByEndUserSessionId),
		Page: 1, Limit: 20,
	}
	if q.Page != nil {
		f.Page = *q.Page
	}
	if q.Limit != nil {
		f.Limit = *q.Limit
	}
	entries, total, err := s.flows.Runs().Logs(ctx, p.AppID, f)
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
