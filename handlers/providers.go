package handlers

import (
	"context"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
)

// modelTypes maps the API's model type names to those of package llm.
var modelTypes = map[string]string{
	"llm":            llm.TypeChat,
	"text-embedding": llm.TypeEmbedding,
	"rerank":         llm.TypeRerank,
	"speech2text":    llm.TypeSpeechToText,
	"tts":            llm.TypeTextToSpeech,
	"moderation":     llm.TypeModeration,
}

// GetAvailableModels serves GET /workspaces/current/models/model-types/{model_type}:
// per configured provider, the models of that type it offers (see
// llm.Registry.Catalog). The builtin provider appkb is always there for the
// types it serves.
func (s *Server) GetAvailableModels(ctx context.Context, req gen.GetAvailableModelsRequestObject) (gen.GetAvailableModelsResponseObject, error) {
	if _, err := principalFrom(ctx); err != nil {
		return nil, err
	}
	typ, ok := modelTypes[req.ModelType]
	if !ok {
		return nil, apperr.InvalidParam("model_type %q is not one of text-embedding, rerank, llm, tts, speech2text, moderation", req.ModelType)
	}
	data := wire.ModelProviders(s.models.Catalog(typ), req.ModelType, typ == llm.TypeChat)
	return gen.GetAvailableModels200JSONResponse{Data: &data}, nil
}
