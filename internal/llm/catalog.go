package llm

import (
	"sort"
)

// ProviderModels is one configured provider together with the models of one
// type that appkb knows it serves.
type ProviderModels struct {
	// Provider is the name to give back in settings such as
	// embedding_model_provider.
	Provider string
	// Backend is BackendBuiltin or BackendOpenAICompatible.
	Backend string
	// Ready is false when the provider cannot work at all, for example
	// because its API key variable is empty.
	Ready bool
	// Models are model names usable with Provider, sorted.
	Models []string
}

// Catalog lists, per provider, the models of type typ (TypeChat,
// TypeEmbedding, …) that can be named in settings. A remote provider offers
// the model its `defaults` entry names for that type; the providers file
// does not say which type the entries of `models` are, so they are not
// listed. The builtin backend offers the model "builtin" for every type it
// implements (chat, rerank, moderation), and BuiltinEmbeddingModel for
// embeddings ("builtin" still embeds as it always did, for the knowledge
// bases made with it, but is not offered any more). Providers without a model
// of that type are left out; the result is sorted by provider name.
func (r *Registry) Catalog(typ string) []ProviderModels {
	if r == nil {
		r = defaultRegistry
	}
	// A provider is reachable under several names (aliases, and the builtin
	// fallback under both builtin names); list each one once, under its own
	// name when that still leads to it, else under its first name that does.
	names := map[*provider]string{}
	for _, key := range r.Providers() {
		p := r.providers[key]
		if cur, seen := names[p]; !seen || (key == p.name && cur != p.name) {
			names[p] = key
		}
	}
	var out []ProviderModels
	for p, name := range names {
		var model string
		if p.backend == BackendBuiltin {
			if !builtinServes(typ) {
				continue
			}
			model = builtinModelName
			if typ == TypeEmbedding {
				model = BuiltinEmbeddingModel
			}
			if d := p.defaults[typ]; d != "" {
				model = d
			}
		} else {
			model = p.defaults[typ]
		}
		if model == "" {
			continue
		}
		out = append(out, ProviderModels{
			Provider: name,
			Backend:  p.backend,
			Ready:    p.ready() == nil,
			Models:   []string{model},
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out
}

// builtinServes reports whether the builtin backend implements a model type.
func builtinServes(typ string) bool {
	switch typ {
	case TypeChat, TypeEmbedding, TypeRerank, TypeModeration:
		return true
	}
	return false
}
