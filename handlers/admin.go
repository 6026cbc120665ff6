package handlers

import (
	"context"
	"io"
	"net/http"

	"appkb/gen"
	"appkb/handlers/journal"
	"appkb/handlers/validation"
	"appkb/internal/admin"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
)

const adminBasePath = validation.AdminBasePath

// Admin configures the test double's side of the server: the admin API,
// the request journal and injected faults. The zero value turns all of it
// off.
type Admin struct {
	// Token opens the admin API; empty leaves it off (its routes answer
	// 404).
	Token string
	// Journal records the requests answered outside the admin API; nil
	// keeps none.
	Journal *journal.Journal
	// Scenarios script the built-in chat model; the admin API changes
	// them. nil means none can be set.
	Scenarios *llm.Scenarios
	// Faults honours the X-Appkb-Fault header.
	Faults bool
	// Service does the admin operations; built over the server's stores
	// when nil.
	Service *admin.Service
}

// maxAdminFile bounds a DSL or scenario body.
const maxAdminFile = 16 << 20

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

func adminApp(a *admin.App) gen.AdminApp {
	out := gen.AdminApp{AppId: a.ID, Name: a.Name, Mode: a.Mode}
	if a.APIKey != "" {
		out.ApiKey = &a.APIKey
	}
	return out
}

func (s *Server) AdminListApps(ctx context.Context, _ gen.AdminListAppsRequestObject) (gen.AdminListAppsResponseObject, error) {
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

func (s *Server) AdminImportApp(ctx context.Context, req gen.AdminImportAppRequestObject) (gen.AdminImportAppResponseObject, error) {
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

func (s *Server) AdminReplaceApp(ctx context.Context, req gen.AdminReplaceAppRequestObject) (gen.AdminReplaceAppResponseObject, error) {
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

func (s *Server) AdminDeleteApp(ctx context.Context, req gen.AdminDeleteAppRequestObject) (gen.AdminDeleteAppResponseObject, error) {
	if err := s.admin.DeleteApp(ctx, req.AppId); err != nil {
		return nil, err
	}
	if s.scenarios != nil {
		s.scenarios.SetApp(req.AppId, nil)
	}
	return gen.AdminDeleteApp204Response{}, nil
}

func (s *Server) AdminCreateAppKey(ctx context.Context, req gen.AdminCreateAppKeyRequestObject) (gen.AdminCreateAppKeyResponseObject, error) {
	key, err := s.admin.CreateAppKey(ctx, req.AppId)
	if err != nil {
		return nil, err
	}
	return gen.AdminCreateAppKey201JSONResponse{ApiKey: key}, nil
}

func (s *Server) AdminCreateKnowledgeKey(ctx context.Context, req gen.AdminCreateKnowledgeKeyRequestObject) (gen.AdminCreateKnowledgeKeyResponseObject, error) {
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

func (s *Server) AdminRevokeKey(ctx context.Context, req gen.AdminRevokeKeyRequestObject) (gen.AdminRevokeKeyResponseObject, error) {
	if _, err := s.admin.RevokeKey(ctx, req.Key); err != nil {
		return nil, err
	}
	return gen.AdminRevokeKey204Response{}, nil
}

func (s *Server) AdminCreateKnowledgeBase(ctx context.Context, req gen.AdminCreateKnowledgeBaseRequestObject) (gen.AdminCreateKnowledgeBaseResponseObject, error) {
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

func (s *Server) AdminReset(ctx context.Context, _ gen.AdminResetRequestObject) (gen.AdminResetResponseObject, error) {
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
func (s *Server) scenarioBody(r io.Reader) (*llm.Scenario, error) {
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

func (s *Server) AdminSetScenario(ctx context.Context, req gen.AdminSetScenarioRequestObject) (gen.AdminSetScenarioResponseObject, error) {
	sc, err := s.scenarioBody(req.Body)
	if err != nil {
		return nil, err
	}
	s.scenarios.SetGlobal(sc)
	return gen.AdminSetScenario200JSONResponse{Rules: len(sc.Rules)}, nil
}

func (s *Server) AdminDeleteScenario(ctx context.Context, _ gen.AdminDeleteScenarioRequestObject) (gen.AdminDeleteScenarioResponseObject, error) {
	if s.scenarios != nil {
		s.scenarios.SetGlobal(nil)
	}
	return gen.AdminDeleteScenario204Response{}, nil
}

func (s *Server) AdminSetAppScenario(ctx context.Context, req gen.AdminSetAppScenarioRequestObject) (gen.AdminSetAppScenarioResponseObject, error) {
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

func (s *Server) AdminDeleteAppScenario(ctx context.Context, req gen.AdminDeleteAppScenarioRequestObject) (gen.AdminDeleteAppScenarioResponseObject, error) {
	if s.scenarios != nil {
		s.scenarios.SetApp(req.AppId, nil)
	}
	return gen.AdminDeleteAppScenario204Response{}, nil
}

func (s *Server) AdminListRequests(ctx context.Context, req gen.AdminListRequestsRequestObject) (gen.AdminListRequestsResponseObject, error) {
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

func (s *Server) AdminClearRequests(ctx context.Context, _ gen.AdminClearRequestsRequestObject) (gen.AdminClearRequestsResponseObject, error) {
	if s.journal != nil {
		s.journal.Clear()
	}
	return gen.AdminClearRequests204Response{}, nil
}
