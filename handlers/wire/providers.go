package wire

import (
	"appkb/gen"
	"appkb/internal/llm"
	"appkb/models"
)

// ModelProviders describes the model catalog of one model type in the
// workspace's terms: a provider that is not ready is "no-configure", the
// built-in offline provider is a predefined one with its own label, and
// every other is a customizable one. modelType is the API's name of the
// type; chat says it is the chat type, whose models are in chat mode.
func ModelProviders(catalog []llm.ProviderModels, modelType string, chat bool) []gen.ModelProvider {
	data := []gen.ModelProvider{}
	for _, p := range catalog {
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
			if chat {
				props["mode"] = "chat"
			}
			ms = append(ms, gen.AvailableModel{
				Model:                          m,
				Label:                          i18n(m),
				ModelType:                      &modelType,
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
	return data
}

// i18n gives the same text in both languages of the API.
func i18n(text string) *gen.ModelI18nText {
	return &gen.ModelI18nText{EnUS: &text, ZhHans: &text}
}
