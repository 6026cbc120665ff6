package adminapi

import (
	"context"
	"io"
	"net/http"

	"appkb/gen"
	"appkb/handlers/journal"
	"appkb/internal/admin"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
)

// maxAdminFile bounds a DSL or scenario body.
const maxAdminFile = 16 << 20

// readAdminFile reads a DSL or scenario body, bounded by maxAdminFile.
func readAdminFile(r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, apperr.InvalidParam("The body must be the file.")
	}
	b, err := io.ReadAll(io.LimitReader(r, maxAdminFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxAdminFile {
		return nil, apperr.New(http.StatusRequestEntityTooLarge, apperr.CodeTooLarge, "The file is over %d bytes.", maxAdminFile)
	}
	if len(b) == 0 {
		return nil, apperr.InvalidParam("The body must be the file; it is empty.")
	}
	return b, nil
}

// adminApp maps an app to the wire; ApiKey is left out when it has none.
func adminApp(a *admin.App) gen.AdminApp {
	out := gen.AdminApp{AppId: a.ID, Name: a.Name, Mode: a.Mode}
	if a.APIKey != "" {
		out.ApiKey = &a.APIKey
	}
	return out
}

// AdminListApps serves GET /admin/v1/apps: every app, oldest first.
func (s *API) AdminListApps(ctx context.Context, _ gen.AdminListAppsRequestObject) (gen.AdminListAppsResponseObject, error) {
	list, err := s.admin.ListApps(ctx)
	if err != nil {
		return nil, err
	}
	out := gen.AdminListApps200JSONResponse{Data: make([]gen.AdminApp, 0, len(list))}
	for i := range list {
		out.Data = append(out.Data, adminApp(&list[i]))
	}
	return out, nil
}

// AdminImportApp serves POST /admin/v1/apps: a new app from a DSL file.
func (s *API) AdminImportApp(ctx context.Context, req gen.AdminImportAppRequestObject) (gen.AdminImportAppResponseObject, error) {
	dsl, err := readAdminFile(req.Body)
	if err != nil {
		return nil, err
	}
	a, err := s.admin.ImportApp(ctx, dsl)
	if err != nil {
		return nil, err
	}
	return gen.AdminImportApp201JSONResponse(adminApp(a)), nil
}

// AdminReplaceApp serves PUT /admin/v1/apps/{app_id}: a new definition for
// the app, which keeps its id and keys.
func (s *API) AdminReplaceApp(ctx context.Context, req gen.AdminReplaceAppRequestObject) (gen.AdminReplaceAppResponseObject, error) {
	dsl, err := readAdminFile(req.Body)
	if err != nil {
		return nil, err
	}
	a, err := s.admin.ReplaceApp(ctx, req.AppId, dsl)
	if err != nil {
		return nil, err
	}
	return gen.AdminReplaceApp200JSONResponse(adminApp(a)), nil
}

// AdminDeleteApp serves DELETE /admin/v1/apps/{app_id}, dropping the
// app's scenario too.
func (s *API) AdminDeleteApp(ctx context.Context, req gen.AdminDeleteAppRequestObject) (gen.AdminDeleteAppResponseObject, error) {
	if err := s.admin.DeleteApp(ctx, req.AppId); err != nil {
		return nil, err
	}
	if s.scenarios != nil {
		s.scenarios.SetApp(req.AppId, nil)
	}
	return gen.AdminDeleteApp204Response{}, nil
}

// AdminCreateAppKey serves POST /admin/v1/apps/{app_id}/keys.
func (s *API) AdminCreateAppKey(ctx context.Context, req gen.AdminCreateAppKeyRequestObject) (gen.AdminCreateAppKeyResponseObject, error) {
	key, err := s.admin.CreateAppKey(ctx, req.AppId)
	if err != nil {
		return nil, err
	}
	return gen.AdminCreateAppKey201JSONResponse{ApiKey: key}, nil
}

// AdminCreateKnowledgeKey serves POST /admin/v1/knowledge-keys.
func (s *API) AdminCreateKnowledgeKey(ctx context.Context, req gen.AdminCreateKnowledgeKeyRequestObject) (gen.AdminCreateKnowledgeKeyResponseObject, error) {
	var ids []string
	if req.Body != nil && req.Body.DatasetIds != nil {
		ids = *req.Body.DatasetIds
	}
	key, err := s.admin.CreateKnowledgeKey(ctx, ids)
	if err != nil {
		return nil, err
	}
	return gen.AdminCreateKnowledgeKey201JSONResponse{ApiKey: key}, nil
}

// AdminRevokeKey serves DELETE /admin/v1/keys/{key}.
func (s *API) AdminRevokeKey(ctx context.Context, req gen.AdminRevokeKeyRequestObject) (gen.AdminRevokeKeyResponseObject, error) {
	if _, err := s.admin.RevokeKey(ctx, req.Key); err != nil {
		return nil, err
	}
	return gen.AdminRevokeKey204Response{}, nil
}

// AdminCreateKnowledgeBase serves POST /admin/v1/knowledge-bases: a knowledge
// base with its documents and a key for it.
func (s *API) AdminCreateKnowledgeBase(ctx context.Context, req gen.AdminCreateKnowledgeBaseRequestObject) (gen.AdminCreateKnowledgeBaseResponseObject, error) {
	var docs []admin.Doc
	if req.Body.Documents != nil {
		for _, d := range *req.Body.Documents {
			docs = append(docs, admin.Doc{Name: valueOf(d.Name), Text: d.Text})
		}
	}
	technique := ""
	if req.Body.IndexingTechnique != nil {
		technique = string(*req.Body.IndexingTechnique)
	}
	kb, err := s.admin.CreateKnowledgeBase(ctx, req.Body.Name, technique, docs)
	if err != nil {
		return nil, err
	}
	return gen.AdminCreateKnowledgeBase201JSONResponse{DatasetId: kb.ID, Name: kb.Name,
		DocumentIds: kb.DocumentIDs, Batches: kb.Batches, ApiKey: kb.APIKey}, nil
}

// AdminReset serves POST /admin/v1/reset: all data goes, and with it
// the journal and the scenarios.
func (s *API) AdminReset(ctx context.Context, _ gen.AdminResetRequestObject) (gen.AdminResetResponseObject, error) {
	if err := s.admin.Reset(ctx); err != nil {
		return nil, err
	}
	if s.journal != nil {
		s.journal.Clear()
	}
	if s.scenarios != nil {
		s.scenarios.Reset()
	}
	return gen.AdminReset204Response{}, nil
}

// scenarioBody reads a scenario sent to the admin API.
func (s *API) scenarioBody(r io.Reader) (*llm.Scenario, error) {
	if s.scenarios == nil {
		return nil, apperr.NotFound("This server's built-in model follows no scenarios.")
	}
	b, err := readAdminFile(r)
	if err != nil {
		return nil, err
	}
	sc, err := llm.ParseScenario(b)
	if err != nil {
		return nil, apperr.InvalidParam("%s", err.Error())
	}
	return sc, nil
}

// AdminSetScenario serves PUT /admin/v1/scenario: the scenario of every app.
func (s *API) AdminSetScenario(ctx context.Context, req gen.AdminSetScenarioRequestObject) (gen.AdminSetScenarioResponseObject, error) {
	sc, err := s.scenarioBody(req.Body)
	if err != nil {
		return nil, err
	}
	s.scenarios.SetGlobal(sc)
	return gen.AdminSetScenario200JSONResponse{Rules: len(sc.Rules)}, nil
}

// AdminDeleteScenario serves DELETE /admin/v1/scenario.
func (s *API) AdminDeleteScenario(ctx context.Context, _ gen.AdminDeleteScenarioRequestObject) (gen.AdminDeleteScenarioResponseObject, error) {
	if s.scenarios != nil {
		s.scenarios.SetGlobal(nil)
	}
	return gen.AdminDeleteScenario204Response{}, nil
}

// AdminSetAppScenario serves PUT /admin/v1/apps/{app_id}/scenario: the
// scenario of one app, which must exist.
func (s *API) AdminSetAppScenario(ctx context.Context, req gen.AdminSetAppScenarioRequestObject) (gen.AdminSetAppScenarioResponseObject, error) {
	if _, err := s.apps.Get(ctx, req.AppId); err != nil {
		return nil, err
	}
	sc, err := s.scenarioBody(req.Body)
	if err != nil {
		return nil, err
	}
	s.scenarios.SetApp(req.AppId, sc)
	return gen.AdminSetAppScenario200JSONResponse{Rules: len(sc.Rules)}, nil
}

// AdminDeleteAppScenario serves DELETE /admin/v1/apps/{app_id}/scenario.
func (s *API) AdminDeleteAppScenario(ctx context.Context, req gen.AdminDeleteAppScenarioRequestObject) (gen.AdminDeleteAppScenarioResponseObject, error) {
	if s.scenarios != nil {
		s.scenarios.SetApp(req.AppId, nil)
	}
	return gen.AdminDeleteAppScenario204Response{}, nil
}

// AdminListRequests serves GET /admin/v1/requests: the journal, filtered.
func (s *API) AdminListRequests(ctx context.Context, req gen.AdminListRequestsRequestObject) (gen.AdminListRequestsResponseObject, error) {
	out := gen.AdminListRequests200JSONResponse{Data: []gen.AdminRequest{}}
	if s.journal == nil {
		return out, nil
	}
	p := req.Params
	f := journal.Filter{Method: valueOf(p.Method), Route: valueOf(p.Route), KeyID: valueOf(p.KeyId)}
	if p.Status != nil {
		f.Status = *p.Status
	}
	if p.Limit != nil {
		f.Limit = *p.Limit
	}
	for _, e := range s.journal.List(f) {
		r := gen.AdminRequest{Seq: e.Seq, Time: e.Time, Method: e.Method, Path: e.Path, Route: e.Route,
			Status: e.Status, BodyBytes: e.BodyBytes, DurationMs: e.DurationMS}
		if e.KeyID != "" {
			r.KeyId = &e.KeyID
		}
		if e.Fault != "" {
			r.Fault = &e.Fault
		}
		out.Data = append(out.Data, r)
	}
	return out, nil
}

// AdminClearRequests serves DELETE /admin/v1/requests.
func (s *API) AdminClearRequests(ctx context.Context, _ gen.AdminClearRequestsRequestObject) (gen.AdminClearRequestsResponseObject, error) {
	if s.journal != nil {
		s.journal.Clear()
	}
	return gen.AdminClearRequests204Response{}, nil
}

// valueOf returns what p points to, or the zero value for nil.
func valueOf[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
