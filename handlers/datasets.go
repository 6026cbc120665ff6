package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// CreateDataset serves POST /datasets.
func (s *Server) CreateDataset(ctx context.Context, req gen.CreateDatasetRequestObject) (gen.CreateDatasetResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets")
}

// ListDatasets serves GET /datasets.
func (s *Server) ListDatasets(ctx context.Context, req gen.ListDatasetsRequestObject) (gen.ListDatasetsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets")
}

// GetDatasetDetail serves GET /datasets/{dataset_id}.
func (s *Server) GetDatasetDetail(ctx context.Context, req gen.GetDatasetDetailRequestObject) (gen.GetDatasetDetailResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}")
}

// UpdateDataset serves PATCH /datasets/{dataset_id}.
func (s *Server) UpdateDataset(ctx context.Context, req gen.UpdateDatasetRequestObject) (gen.UpdateDatasetResponseObject, error) {
	return nil, apperr.NotImplemented("PATCH /datasets/{dataset_id}")
}

// DeleteDataset serves DELETE /datasets/{dataset_id}.
func (s *Server) DeleteDataset(ctx context.Context, req gen.DeleteDatasetRequestObject) (gen.DeleteDatasetResponseObject, error) {
	return nil, apperr.NotImplemented("DELETE /datasets/{dataset_id}")
}

// RetrieveSegments serves POST /datasets/{dataset_id}/retrieve.
func (s *Server) RetrieveSegments(ctx context.Context, req gen.RetrieveSegmentsRequestObject) (gen.RetrieveSegmentsResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/retrieve")
}
