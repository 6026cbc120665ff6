package handlers

import (
	"context"

	"appkb/gen"
	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
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
	data := []gen.ModelProvider{}
	for _, p := range s.models.Catalog(typ) {
		status := "active"
		if !p.Ready {
			status = "no-configure"
		}
		fetchFrom := "customizable-model"
		label := p.Provider
		if p.Backend == llm.BackendBuiltin {
			fetchFrom = "predefined-model"
			label = p.Provider + " (built-in offline models)"
		}
		ms := make([]gen.AvailableModel, 0, len(p.Models))
		for _, m := range p.Models {
			props := map[string]any{}
			if typ == llm.TypeChat {
				props["mode"] = "chat"
			}
			ms = append(ms, gen.AvailableModel{
				Model:                          m,
				Label:                          i18n(m),
				ModelType:                      &req.ModelType,
				FetchFrom:                      &fetchFrom,
				ModelProperties:                &props,
				Status:                         &status,
				Deprecated:                     new(false),
				LoadBalancingEnabled:           new(false),
				HasInvalidLoadBalancingConfigs: new(false),
			})
		}
		tenant := models.WorkspaceID
		data = append(data, gen.ModelProvider{
			Provider: p.Provider,
			Label:    i18n(label),
			Status:   &status,
			Models:   &ms,
			TenantId: &tenant,
		})
	}
	return gen.GetAvailableModels200JSONResponse{Data: &data}, nil
}

// i18n gives the same text in both languages of the API.
func i18n(text string) *gen.ModelI18nText {
	return &gen.ModelI18nText{EnUS: &text, ZhHans: &text}
}
