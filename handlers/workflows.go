package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// GetWorkflowRunDetail serves GET /workflows/run/{workflow_run_id}.
func (s *Server) GetWorkflowRunDetail(ctx context.Context, req gen.GetWorkflowRunDetailRequestObject) (gen.GetWorkflowRunDetailResponseObject, error) {
	return nil, apperr.NotImplemented("GET /workflows/run/{workflow_run_id}")
}

// GetWorkflowLogs serves GET /workflows/logs.
func (s *Server) GetWorkflowLogs(ctx context.Context, req gen.GetWorkflowLogsRequestObject) (gen.GetWorkflowLogsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /workflows/logs")
}

// StreamWorkflowEvents serves GET /workflow/{workflow_run_id}/events.
func (s *Server) StreamWorkflowEvents(ctx context.Context, req gen.StreamWorkflowEventsRequestObject) (gen.StreamWorkflowEventsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /workflow/{workflow_run_id}/events")
}

// ExecuteWorkflow serves POST /workflows/run.
func (s *Server) ExecuteWorkflow(ctx context.Context, req gen.ExecuteWorkflowRequestObject) (gen.ExecuteWorkflowResponseObject, error) {
	return nil, apperr.NotImplemented("POST /workflows/run")
}

// RunWorkflowById serves POST /workflows/{workflow_id}/run.
func (s *Server) RunWorkflowById(ctx context.Context, req gen.RunWorkflowByIdRequestObject) (gen.RunWorkflowByIdResponseObject, error) {
	return nil, apperr.NotImplemented("POST /workflows/{workflow_id}/run")
}

// StopWorkflowTaskGeneration serves POST /workflows/tasks/{task_id}/stop.
func (s *Server) StopWorkflowTaskGeneration(ctx context.Context, req gen.StopWorkflowTaskGenerationRequestObject) (gen.StopWorkflowTaskGenerationResponseObject, error) {
	return nil, apperr.NotImplemented("POST /workflows/tasks/{task_id}/stop")
}
