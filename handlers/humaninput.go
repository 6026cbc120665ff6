package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"appkb/gen"
	"appkb/handlers/sse"
	"appkb/internal/run/flows"
	"appkb/models"
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
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	form, err := s.flows.Form(ctx, p.AppID, req.FormToken)
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
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.flows.SubmitForm(ctx, p.AppID, req.FormToken, req.Body.User, req.Body.Action, req.Body.Inputs); err != nil {
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
	return s.flows.FlowApp(ctx, p.AppID)
}

// streamRunEvents serves GET /workflow/{workflow_run_id}/events: the
// events of a run, followed from another request (see flows.Follow).
func (s *Server) streamRunEvents(c echo.Context, runID string, params gen.StreamWorkflowEventsParams) error {
	ctx := c.Request().Context()
	p, err := principalFrom(ctx)
	if err != nil {
		return err
	}
	run, err := s.flows.Follow(ctx, flows.FollowRequest{
		AppID: p.AppID, RunID: runID, User: params.User,
		ContinueOnPause: params.ContinueOnPause != nil && *params.ContinueOnPause,
		IncludeSnapshot: params.IncludeStateSnapshot != nil && *params.IncludeStateSnapshot,
	})
	if err != nil {
		return err
	}
	return s.pump(c, run, sse.Dify)
}
