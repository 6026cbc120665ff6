package handlers

import (
	"context"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/conversation/annotations"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// annotationService is the server's annotation service.
func (s *Server) annotationService() *annotations.Service { return s.annotations }

// CreateAnnotation serves POST /apps/annotations.
func (s *Server) CreateAnnotation(ctx context.Context, req gen.CreateAnnotationRequestObject) (gen.CreateAnnotationResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, apperr.InvalidParam("request body is required")
	}
	a, err := s.annotationService().Create(ctx, p.AppID, req.Body.Question, req.Body.Answer)
	if err != nil {
		return nil, err
	}
	return gen.CreateAnnotation201JSONResponse(annotationItem(a)), nil
}

// GetAnnotationList serves GET /apps/annotations: one page, newest first.
func (s *Server) GetAnnotationList(ctx context.Context, req gen.GetAnnotationListRequestObject) (gen.GetAnnotationListResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	res, err := s.annotationService().List(ctx, p.AppID, wire.ValueOr(q.Page, 1), wire.ValueOr(q.Limit, annotations.DefaultPageSize), wire.ValueOf(q.Keyword))
	if err != nil {
		return nil, err
	}
	out := gen.GetAnnotationList200JSONResponse{
		Data:    make([]gen.AnnotationItem, len(res.Items)),
		HasMore: res.HasMore,
		Limit:   res.Limit,
		Page:    res.Page,
		Total:   int(res.Total),
	}
	for i := range res.Items {
		out.Data[i] = annotationItem(&res.Items[i])
	}
	return out, nil
}

// UpdateAnnotation serves PUT /apps/annotations/{annotation_id}.
func (s *Server) UpdateAnnotation(ctx context.Context, req gen.UpdateAnnotationRequestObject) (gen.UpdateAnnotationResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, apperr.InvalidParam("request body is required")
	}
	a, err := s.annotationService().Update(ctx, p.AppID, req.AnnotationId, req.Body.Question, req.Body.Answer)
	if err != nil {
		return nil, err
	}
	return gen.UpdateAnnotation200JSONResponse(annotationItem(a)), nil
}

// DeleteAnnotation serves DELETE /apps/annotations/{annotation_id}.
func (s *Server) DeleteAnnotation(ctx context.Context, req gen.DeleteAnnotationRequestObject) (gen.DeleteAnnotationResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.annotationService().Delete(ctx, p.AppID, req.AnnotationId); err != nil {
		return nil, err
	}
	return gen.DeleteAnnotation204Response{}, nil
}

// InitialAnnotationReplySettings serves POST /apps/annotation-reply/{action}:
// it starts the background job that switches annotation replies on or off.
func (s *Server) InitialAnnotationReplySettings(ctx context.Context, req gen.InitialAnnotationReplySettingsRequestObject) (gen.InitialAnnotationReplySettingsResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, apperr.InvalidParam("request body is required")
	}
	job, err := s.annotationService().StartJob(ctx, p.AppID, string(req.Action), annotations.ReplyConfig{
		EmbeddingProviderName: req.Body.EmbeddingProviderName,
		EmbeddingModelName:    req.Body.EmbeddingModelName,
		ScoreThreshold:        annotations.RoundThreshold(req.Body.ScoreThreshold),
	})
	if err != nil {
		return nil, err
	}
	return gen.InitialAnnotationReplySettings200JSONResponse{JobId: job.ID, JobStatus: job.Status}, nil
}

// GetInitialAnnotationReplySettingsStatus serves
// GET /apps/annotation-reply/{action}/status/{job_id}.
func (s *Server) GetInitialAnnotationReplySettingsStatus(ctx context.Context, req gen.GetInitialAnnotationReplySettingsStatusRequestObject) (gen.GetInitialAnnotationReplySettingsStatusResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	job, err := s.annotationService().Job(ctx, p.AppID, string(req.Action), req.JobId)
	if err != nil {
		return nil, err
	}
	msg := job.ErrorMsg
	return gen.GetInitialAnnotationReplySettingsStatus200JSONResponse{JobId: job.ID, JobStatus: job.Status, ErrorMsg: &msg}, nil
}

// annotationItem is the wire form of an annotation.
func annotationItem(a *models.Annotation) gen.AnnotationItem {
	created := a.CreatedAt.Unix()
	hits := a.HitCount
	return gen.AnnotationItem{
		Id:        a.ID,
		Question:  &a.Question,
		Answer:    &a.Answer,
		HitCount:  &hits,
		CreatedAt: &created,
	}
}
