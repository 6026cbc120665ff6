package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// CreateKnowledgeTag serves POST /datasets/tags.
func (s *Server) CreateKnowledgeTag(ctx context.Context, req gen.CreateKnowledgeTagRequestObject) (gen.CreateKnowledgeTagResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/tags")
}

// GetKnowledgeTags serves GET /datasets/tags.
func (s *Server) GetKnowledgeTags(ctx context.Context, req gen.GetKnowledgeTagsRequestObject) (gen.GetKnowledgeTagsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/tags")
}

// UpdateKnowledgeTag serves PATCH /datasets/tags.
func (s *Server) UpdateKnowledgeTag(ctx context.Context, req gen.UpdateKnowledgeTagRequestObject) (gen.UpdateKnowledgeTagResponseObject, error) {
	return nil, apperr.NotImplemented("PATCH /datasets/tags")
}

// DeleteKnowledgeTag serves DELETE /datasets/tags.
func (s *Server) DeleteKnowledgeTag(ctx context.Context, req gen.DeleteKnowledgeTagRequestObject) (gen.DeleteKnowledgeTagResponseObject, error) {
	return nil, apperr.NotImplemented("DELETE /datasets/tags")
}

// BindTagsToDataset serves POST /datasets/tags/binding.
func (s *Server) BindTagsToDataset(ctx context.Context, req gen.BindTagsToDatasetRequestObject) (gen.BindTagsToDatasetResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/tags/binding")
}

// UnbindTagFromDataset serves POST /datasets/tags/unbinding.
func (s *Server) UnbindTagFromDataset(ctx context.Context, req gen.UnbindTagFromDatasetRequestObject) (gen.UnbindTagFromDatasetResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/tags/unbinding")
}

// QueryDatasetTags serves GET /datasets/{dataset_id}/tags.
func (s *Server) QueryDatasetTags(ctx context.Context, req gen.QueryDatasetTagsRequestObject) (gen.QueryDatasetTagsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/tags")
}
