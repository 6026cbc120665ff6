package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// CreateMetadataField serves POST /datasets/{dataset_id}/metadata.
func (s *Server) CreateMetadataField(ctx context.Context, req gen.CreateMetadataFieldRequestObject) (gen.CreateMetadataFieldResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/metadata")
}

// ListMetadataFields serves GET /datasets/{dataset_id}/metadata.
func (s *Server) ListMetadataFields(ctx context.Context, req gen.ListMetadataFieldsRequestObject) (gen.ListMetadataFieldsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/metadata")
}

// UpdateMetadataField serves PATCH /datasets/{dataset_id}/metadata/{metadata_id}.
func (s *Server) UpdateMetadataField(ctx context.Context, req gen.UpdateMetadataFieldRequestObject) (gen.UpdateMetadataFieldResponseObject, error) {
	return nil, apperr.NotImplemented("PATCH /datasets/{dataset_id}/metadata/{metadata_id}")
}

// DeleteMetadataField serves DELETE /datasets/{dataset_id}/metadata/{metadata_id}.
func (s *Server) DeleteMetadataField(ctx context.Context, req gen.DeleteMetadataFieldRequestObject) (gen.DeleteMetadataFieldResponseObject, error) {
	return nil, apperr.NotImplemented("DELETE /datasets/{dataset_id}/metadata/{metadata_id}")
}

// GetBuiltInMetadataFields serves GET /datasets/{dataset_id}/metadata/built-in.
func (s *Server) GetBuiltInMetadataFields(ctx context.Context, req gen.GetBuiltInMetadataFieldsRequestObject) (gen.GetBuiltInMetadataFieldsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/metadata/built-in")
}

// ToggleBuiltInMetadataField serves POST /datasets/{dataset_id}/metadata/built-in/{action}.
func (s *Server) ToggleBuiltInMetadataField(ctx context.Context, req gen.ToggleBuiltInMetadataFieldRequestObject) (gen.ToggleBuiltInMetadataFieldResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/metadata/built-in/{action}")
}

// BatchUpdateDocumentMetadata serves POST /datasets/{dataset_id}/documents/metadata.
func (s *Server) BatchUpdateDocumentMetadata(ctx context.Context, req gen.BatchUpdateDocumentMetadataRequestObject) (gen.BatchUpdateDocumentMetadataResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/documents/metadata")
}
