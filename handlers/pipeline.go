package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// UploadPipelineFile serves POST /datasets/pipeline/file-upload.
func (s *Server) UploadPipelineFile(ctx context.Context, req gen.UploadPipelineFileRequestObject) (gen.UploadPipelineFileResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/pipeline/file-upload")
}

// ListDatasourcePlugins serves GET /datasets/{dataset_id}/pipeline/datasource-plugins.
func (s *Server) ListDatasourcePlugins(ctx context.Context, req gen.ListDatasourcePluginsRequestObject) (gen.ListDatasourcePluginsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/pipeline/datasource-plugins")
}

// RunDatasourceNode serves POST /datasets/{dataset_id}/pipeline/datasource/nodes/{node_id}/run.
func (s *Server) RunDatasourceNode(ctx context.Context, req gen.RunDatasourceNodeRequestObject) (gen.RunDatasourceNodeResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/pipeline/datasource/nodes/{node_id}/run")
}

// RunPipeline serves POST /datasets/{dataset_id}/pipeline/run.
func (s *Server) RunPipeline(ctx context.Context, req gen.RunPipelineRequestObject) (gen.RunPipelineResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/pipeline/run")
}
