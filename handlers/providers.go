package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// GetAvailableModels serves GET /workspaces/current/models/model-types/{model_type}.
func (s *Server) GetAvailableModels(ctx context.Context, req gen.GetAvailableModelsRequestObject) (gen.GetAvailableModelsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /workspaces/current/models/model-types/{model_type}")
}
