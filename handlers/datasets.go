package handlers

import (
	"context"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/platform/apperr"
)

// CreateDataset serves POST /datasets: a new, empty knowledge base.
func (s *Server) CreateDataset(ctx context.Context, req gen.CreateDatasetRequestObject) (gen.CreateDatasetResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	rm, err := wire.DomainRetrievalModelOrNil(b.RetrievalModel)
	if err != nil {
		return nil, err
	}
	p := datasets.CreateParams{
		Name:                   b.Name,
		Description:            b.Description,
		IndexingTechnique:      (*string)(b.IndexingTechnique),
		Permission:             (*string)(b.Permission),
		Provider:               (*string)(b.Provider),
		EmbeddingModel:         b.EmbeddingModel,
		EmbeddingModelProvider: b.EmbeddingModelProvider,
		RetrievalModel:         rm,
	}
	if b.SummaryIndexSetting != nil {
		si := b.SummaryIndexSetting
		sis := wire.DomainSummaryIndexSetting(si.Enable, si.ModelName, si.ModelProviderName, si.SummaryPrompt)
		p.SummaryIndexSetting = &sis
	}
	ds, err := s.kb.CreateDataset(ctx, actor, p)
	if err != nil {
		return nil, err
	}
	return gen.CreateDataset200JSONResponse(wire.Dataset(ds)), nil
}

// ListDatasets serves GET /datasets: one page of the knowledge bases the key
// may use, newest first.
func (s *Server) ListDatasets(ctx context.Context, req gen.ListDatasetsRequestObject) (gen.ListDatasetsResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	// openapi.yaml bounds page and limit; the validator has checked them.
	q := req.Params
	p := datasets.ListParams{Page: wire.ValueOf(q.Page), Limit: wire.ValueOf(q.Limit), Keyword: wire.ValueOf(q.Keyword)}
	if q.TagIds != nil {
		p.TagIDs = *q.TagIds
	}
	page, err := s.kb.ListDatasets(ctx, actor, p)
	if err != nil {
		return nil, err
	}
	return gen.ListDatasets200JSONResponse(wire.DatasetPage(page)), nil
}

// GetDatasetDetail serves GET /datasets/{dataset_id}.
func (s *Server) GetDatasetDetail(ctx context.Context, req gen.GetDatasetDetailRequestObject) (gen.GetDatasetDetailResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	ds, err := s.kb.GetDataset(ctx, actor, req.DatasetId)
	if err != nil {
		return nil, err
	}
	return gen.GetDatasetDetail200JSONResponse(wire.Dataset(ds)), nil
}

// UpdateDataset serves PATCH /datasets/{dataset_id}: only the settings in
// the body change.
func (s *Server) UpdateDataset(ctx context.Context, req gen.UpdateDatasetRequestObject) (gen.UpdateDatasetResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	rm, err := wire.DomainRetrievalModelOrNil(b.RetrievalModel)
	if err != nil {
		return nil, err
	}
	p := datasets.UpdateParams{
		Name:                   b.Name,
		Description:            b.Description,
		IndexingTechnique:      (*string)(b.IndexingTechnique),
		Permission:             (*string)(b.Permission),
		EmbeddingModel:         b.EmbeddingModel,
		EmbeddingModelProvider: b.EmbeddingModelProvider,
		RetrievalModel:         rm,
	}
	if b.PartialMemberList != nil {
		members := []string{}
		for _, m := range *b.PartialMemberList {
			if m.UserId != nil {
				members = append(members, *m.UserId)
			}
		}
		p.PartialMemberList = &members
	}
	ds, err := s.kb.UpdateDataset(ctx, actor, req.DatasetId, p)
	if err != nil {
		return nil, err
	}
	return gen.UpdateDataset200JSONResponse(wire.Dataset(ds)), nil
}

// DeleteDataset serves DELETE /datasets/{dataset_id}.
func (s *Server) DeleteDataset(ctx context.Context, req gen.DeleteDatasetRequestObject) (gen.DeleteDatasetResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.docs.DeleteDataset(ctx, actor, req.DatasetId); err != nil {
		return nil, err
	}
	return gen.DeleteDataset204Response{}, nil
}

// RetrieveSegments serves POST /datasets/{dataset_id}/retrieve.
// The knowledge base's stored search settings apply unless the request
// gives its own.
func (s *Server) RetrieveSegments(ctx context.Context, req gen.RetrieveSegmentsRequestObject) (gen.RetrieveSegmentsResponseObject, error) {
	out, err := s.searchDataset(ctx, req.DatasetId, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.RetrieveSegments200JSONResponse(out), nil
}

// HitTestSegments serves POST /datasets/{dataset_id}/hit-testing, the other
// path Dify serves the same search on.
func (s *Server) HitTestSegments(ctx context.Context, req gen.HitTestSegmentsRequestObject) (gen.HitTestSegmentsResponseObject, error) {
	out, err := s.searchDataset(ctx, req.DatasetId, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.HitTestSegments200JSONResponse(out), nil
}

func (s *Server) searchDataset(ctx context.Context, datasetID string, body *gen.RetrieveRequest) (gen.RetrieveResult, error) {
	actor, body, err := actorWithBody(s, ctx, body)
	if err != nil {
		return gen.RetrieveResult{}, err
	}
	ds, err := s.kb.FindDataset(ctx, actor, datasetID)
	if err != nil {
		return gen.RetrieveResult{}, err
	}
	rm, err := datasets.EffectiveRetrievalModel(ds)
	if err != nil {
		return gen.RetrieveResult{}, err
	}
	if body.RetrievalModel != nil {
		if rm, err = wire.DomainRetrievalModel(body.RetrievalModel); err != nil {
			return gen.RetrieveResult{}, err
		}
	}
	return s.retrieve(ctx, ds.ID, body.Query, rm)
}

// actorOf is the key a knowledge request is done for: its id, recorded as
// creator, and the knowledge bases it is limited to.
func (s *Server) actorOf(ctx context.Context) (datasets.Actor, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return datasets.Actor{}, err
	}
	return datasets.Actor{KeyID: p.KeyID, Datasets: p.Datasets}, nil
}

// actorWithBody is actorOf for an operation that needs a request body: a
// missing body fails once the key has been checked.
func actorWithBody[B any](s *Server, ctx context.Context, body *B) (datasets.Actor, *B, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return actor, nil, err
	}
	if body == nil {
		return actor, nil, apperr.InvalidParam("request body is required")
	}
	return actor, body, nil
}
