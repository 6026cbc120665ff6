package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// CreateAnnotation serves POST /apps/annotations.
func (s *Server) CreateAnnotation(ctx context.Context, req gen.CreateAnnotationRequestObject) (gen.CreateAnnotationResponseObject, error) {
	return nil, apperr.NotImplemented("POST /apps/annotations")
}

// GetAnnotationList serves GET /apps/annotations.
func (s *Server) GetAnnotationList(ctx context.Context, req gen.GetAnnotationListRequestObject) (gen.GetAnnotationListResponseObject, error) {
	return nil, apperr.NotImplemented("GET /apps/annotations")
}

// UpdateAnnotation serves PUT /apps/annotations/{annotation_id}.
func (s *Server) UpdateAnnotation(ctx context.Context, req gen.UpdateAnnotationRequestObject) (gen.UpdateAnnotationResponseObject, error) {
	return nil, apperr.NotImplemented("PUT /apps/annotations/{annotation_id}")
}

// DeleteAnnotation serves DELETE /apps/annotations/{annotation_id}.
func (s *Server) DeleteAnnotation(ctx context.Context, req gen.DeleteAnnotationRequestObject) (gen.DeleteAnnotationResponseObject, error) {
	return nil, apperr.NotImplemented("DELETE /apps/annotations/{annotation_id}")
}

// InitialAnnotationReplySettings serves POST /apps/annotation-reply/{action}.
func (s *Server) InitialAnnotationReplySettings(ctx context.Context, req gen.InitialAnnotationReplySettingsRequestObject) (gen.InitialAnnotationReplySettingsResponseObject, error) {
	return nil, apperr.NotImplemented("POST /apps/annotation-reply/{action}")
}

// GetInitialAnnotationReplySettingsStatus serves GET /apps/annotation-reply/{action}/status/{job_id}.
func (s *Server) GetInitialAnnotationReplySettingsStatus(ctx context.Context, req gen.GetInitialAnnotationReplySettingsStatusRequestObject) (gen.GetInitialAnnotationReplySettingsStatusResponseObject, error) {
	return nil, apperr.NotImplemented("GET /apps/annotation-reply/{action}/status/{job_id}")
}
