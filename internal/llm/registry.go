package llm

import (
	"appkb/internal/platform/apperr"

	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"unicode/utf8"
)

// builtinNames are provider names that always mean the builtin backend
// unless the providers file defines them. The demo apps use "appkb".
var builtinNames = []string{"appkb", "builtin"}

// Registry maps provider names to configured backends. It is read-only after
// Load and safe for concurrent use. A nil *Registry behaves like one loaded
// from no file and an empty environment: everything is served by the builtin
// backend.
type Registry struct {
	strict    bool
	providers map[string]*provider
	fallback  *provider
	// scenarios, when set, script the built-in chat model (serve --scenario
	// and the admin API).
	scenarios *Scenarios
}

// FollowScenarios makes the built-in chat model follow s. It is called once,
// while the server is built, before any model is looked up.
func (r *Registry) FollowScenarios(s *Scenarios) { r.scenarios = s }

// provider is one configured entry with its backend.
type provider struct {
	*settings
	remote *remoteClient // set for the openai-compatible backend
}

// Load reads the providers file at path (none when path is empty) and the
// environment variables OPENAI_BASE_URL and OPENAI_API_KEY through getenv
// (nil means an empty environment). With strict set, lookups of provider
// names that nothing configures fail with provider_not_initialize instead of
// falling back to the builtin backend.
func Load(path string, getenv func(string) string, strict bool) (*Registry, error) {
	var data []byte
	if path != "" {
		var err error
		data, err = os.ReadFile(path)
		if err != nil {
			return nil, err
		}
	}
	r, err := Parse(data, getenv, strict)
	if err != nil && path != "" {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, err
}

// Parse is Load for the contents of a providers file.
func Parse(data []byte, getenv func(string) string, strict bool) (*Registry, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	cfg, err := parseFile(data)
	if err != nil {
		return nil, err
	}
	r := &Registry{strict: strict, providers: map[string]*provider{}}
	for i, pc := range cfg.Providers {
		s, err := pc.validate(getenv)
		if err != nil {
			return nil, fmt.Errorf("providers[%d] (%s): %w", i, pc.Name, err)
		}
		if err := r.add(s); err != nil {
			return nil, fmt.Errorf("providers[%d] (%s): %w", i, pc.Name, err)
		}
		if s.apiKeyEnv != "" && s.apiKey == "" {
			slog.Warn("llm: API key variable is empty; calls to this provider will fail", "provider", s.name, "variable", s.apiKeyEnv)
		}
	}
	if _, ok := r.providers["openai"]; !ok {
		baseURL, key := getenv("OPENAI_BASE_URL"), getenv("OPENAI_API_KEY")
		if baseURL != "" || key != "" {
			pc := providerConfig{Name: "openai", Backend: BackendOpenAICompatible, BaseURL: baseURL, APIKey: key}
			s, err := pc.validate(getenv)
			if err != nil {
				return nil, fmt.Errorf("OPENAI_BASE_URL: %w", err)
			}
			if err := r.add(s); err != nil {
				return nil, err
			}
		}
	}
	builtin, _ := providerConfig{Name: builtinNames[0], Backend: BackendBuiltin}.validate(getenv)
	r.fallback = &provider{settings: builtin}
	for _, n := range builtinNames {
		if _, ok := r.providers[n]; !ok {
			r.providers[n] = r.fallback
		}
	}
	return r, nil
}

func (r *Registry) add(s *settings) error {
	p := &provider{settings: s}
	if s.backend == BackendOpenAICompatible {
		p.remote = newRemoteClient(s)
	}
	for _, n := range s.names {
		if _, dup := r.providers[n]; dup {
			return fmt.Errorf("provider name %q is configured twice", n)
		}
		r.providers[n] = p
	}
	return nil
}

// defaultRegistry serves a nil *Registry.
var defaultRegistry, _ = Parse(nil, nil, false)

// Providers lists the configured provider names (after normalisation,
// aliases included), sorted.
func (r *Registry) Providers() []string {
	if r == nil {
		r = defaultRegistry
	}
	names := make([]string, 0, len(r.providers))
	for n := range r.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Backend reports which backend serves a provider name, or an error when
// the name is not configured and the registry is strict.
func (r *Registry) Backend(providerName string) (string, error) {
	p, err := r.lookup(providerName)
	if err != nil {
		return "", err
	}
	return p.backend, nil
}

// Configured reports whether the providers file or the environment
// configures a provider name (the builtin names always are); names that are
// not configured fail, or fall back to the builtin model when the registry
// is not strict.
func (r *Registry) Configured(providerName string) bool {
	if r == nil {
		r = defaultRegistry
	}
	_, ok := r.providers[NormalizeProvider(providerName)]
	return ok
}

func (r *Registry) lookup(name string) (*provider, error) {
	if r == nil {
		r = defaultRegistry
	}
	key := NormalizeProvider(name)
	if p, ok := r.providers[key]; ok {
		return p, nil
	}
	if r.strict {
		if key == "" {
			return nil, modelError(apperr.CodeProviderNotInitialize, nil, "No model provider is given.")
		}
		return nil, modelError(apperr.CodeProviderNotInitialize, nil, "Model provider %q is not configured.", strings.TrimSpace(name))
	}
	return r.fallback, nil
}

// resolve maps the model name an app uses to the name sent to the backend
// and its prices. An empty name selects the entry's default for the type.
// MaxModelName is the longest model name accepted, as long as Dify's
// columns for model names. Names are otherwise open (a remote server
// serves what it serves), but every stored vector row carries its model's
// name, so an absurd one would weigh on every write.
const MaxModelName = 255

func (p *provider) resolve(typ, model string) (string, *pricing, error) {
	model = strings.TrimSpace(model)
	if model == "" {
		model = p.defaults[typ]
	}
	if model == "" {
		if p.backend == BackendBuiltin {
			return builtinModelName, nil, nil
		}
		return "", nil, modelError(apperr.CodeModelNotSupported, nil,
			"No %s model is named and provider %q has no default for it.", strings.ReplaceAll(typ, "_", "-"), p.name)
	}
	if utf8.RuneCountInString(model) > MaxModelName {
		return "", nil, modelError(apperr.CodeModelNotSupported, nil,
			"A model name may be at most %d characters long.", MaxModelName)
	}
	ms, ok := p.models[model]
	if !ok {
		return model, nil, nil
	}
	price := ms.price
	if price == nil && ms.real != model {
		// An alias without prices of its own uses those of its target.
		price = p.models[ms.real].price
	}
	return ms.real, price, nil
}

// ready reports a provider that cannot work at all, e.g. a missing API key.
func (p *provider) ready() error {
	if p.apiKeyEnv != "" && p.apiKey == "" {
		return modelError(apperr.CodeProviderNotInitialize, nil,
			"Model provider %q has no API key: the variable %s is empty.", p.name, p.apiKeyEnv)
	}
	return nil
}

// Chat returns the chat model that app definitions call provider/model.
func (r *Registry) Chat(providerName, model string) (ChatModel, error) {
	p, name, price, err := r.model(providerName, TypeChat, model)
	if err != nil {
		return nil, err
	}
	if p.remote == nil {
		builtin := &builtinChat{model: name, price: price}
		if r != nil && r.scenarios != nil {
			return observedChat{&scenarioChat{builtin: builtin, scenarios: r.scenarios, provider: p.name}, p.name}, nil
		}
		return observedChat{builtin, p.name}, nil
	}
	return observedChat{&remoteChat{p: p, model: name, price: price}, p.name}, nil
}

// Embedding returns a text embedding model.
func (r *Registry) Embedding(providerName, model string) (Embedder, error) {
	p, name, price, err := r.model(providerName, TypeEmbedding, model)
	if err != nil {
		return nil, err
	}
	if p.remote == nil {
		return observedEmbedder{&builtinEmbedder{model: name, price: price}, p.name}, nil
	}
	return observedEmbedder{&remoteEmbedder{p: p, model: name, price: price}, p.name}, nil
}

// Rerank returns a rerank model. The openai-compatible backend calls the
// server's POST /rerank (as Jina, SiliconFlow, Xinference and vLLM offer).
func (r *Registry) Rerank(providerName, model string) (Reranker, error) {
	p, name, _, err := r.model(providerName, TypeRerank, model)
	if err != nil {
		return nil, err
	}
	if p.remote == nil {
		return observedReranker{builtinReranker{}, p.name}, nil
	}
	return observedReranker{&remoteReranker{p: p, model: name}, p.name}, nil
}

// SpeechToText returns a transcription model. The builtin backend's runs
// ffmpeg and pocketsphinx (see speech.go).
func (r *Registry) SpeechToText(providerName, model string) (Transcriber, error) {
	p, name, _, err := r.model(providerName, TypeSpeechToText, model)
	if err != nil {
		return nil, err
	}
	if p.remote == nil {
		return builtinTranscriber{}, nil
	}
	return &remoteTranscriber{p: p, model: name}, nil
}

// TextToSpeech returns a speech synthesis model. The builtin backend's runs
// espeak-ng and an MP3 encoder (see speech.go).
func (r *Registry) TextToSpeech(providerName, model string) (Speaker, error) {
	p, name, _, err := r.model(providerName, TypeTextToSpeech, model)
	if err != nil {
		return nil, err
	}
	if p.remote == nil {
		return builtinSpeaker{}, nil
	}
	return &remoteSpeaker{p: p, model: name}, nil
}

// Moderation returns a moderation model. The builtin one flags texts that
// contain one of the entry's keywords, and nothing otherwise.
func (r *Registry) Moderation(providerName, model string) (Moderator, error) {
	p, name, _, err := r.model(providerName, TypeModeration, model)
	if err != nil {
		return nil, err
	}
	if p.remote == nil {
		return newBuiltinModerator(p.keywords), nil
	}
	return &remoteModerator{p: p, model: name}, nil
}

func (r *Registry) model(providerName, typ, model string) (*provider, string, *pricing, error) {
	p, err := r.lookup(providerName)
	if err != nil {
		return nil, "", nil, err
	}
	if err := p.ready(); err != nil {
		return nil, "", nil, err
	}
	name, price, err := p.resolve(typ, model)
	if err != nil {
		return nil, "", nil, err
	}
	return p, name, price, nil
}
