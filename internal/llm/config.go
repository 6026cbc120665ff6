package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Backend names accepted in the providers file.
const (
	BackendOpenAICompatible = "openai-compatible"
	BackendBuiltin          = "builtin"
)

// Defaults applied to provider entries that leave a field out.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultMaxRetries = 2
	DefaultCurrency   = "USD"
	defaultOpenAIURL  = "https://api.openai.com/v1"
	maxRetriesLimit   = 10
)

// Model types, as used in the `defaults` section of a provider entry.
const (
	TypeChat         = "chat"
	TypeEmbedding    = "embedding"
	TypeRerank       = "rerank"
	TypeSpeechToText = "speech_to_text"
	TypeTextToSpeech = "text_to_speech"
	TypeModeration   = "moderation"
)

var modelTypes = []string{TypeChat, TypeEmbedding, TypeRerank, TypeSpeechToText, TypeTextToSpeech, TypeModeration}

// fileConfig is the top level of the providers file.
type fileConfig struct {
	Providers []providerConfig `yaml:"providers"`
}

// providerConfig is one entry of the providers file, as written.
type providerConfig struct {
	Name        string                 `yaml:"name"`
	Aliases     []string               `yaml:"aliases"`
	Backend     string                 `yaml:"backend"`
	BaseURL     string                 `yaml:"base_url"`
	APIKey      string                 `yaml:"api_key"`
	APIKeyEnv   string                 `yaml:"api_key_env"`
	Headers     map[string]string      `yaml:"headers"`
	Timeout     duration               `yaml:"timeout"`
	MaxRetries  *int                   `yaml:"max_retries"`
	Defaults    map[string]string      `yaml:"defaults"`
	Voice       string                 `yaml:"voice"`
	ExtraParams []string               `yaml:"extra_params"`
	PriceUnit   string                 `yaml:"price_unit"`
	Currency    string                 `yaml:"currency"`
	Models      map[string]modelConfig `yaml:"models"`
	Keywords    []string               `yaml:"keywords"`
}

// modelConfig is one entry of a provider's `models` map.
type modelConfig struct {
	Model  string   `yaml:"model"`
	Input  *decimal `yaml:"input"`
	Output *decimal `yaml:"output"`
}

// decimal is a non-negative price kept as the exact text of the file, so
// that "0.15" never turns into 0.1499999.
type decimal struct {
	text string
	rat  *big.Rat
}

func (d *decimal) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a price must be a number", n.Line)
	}
	s := strings.TrimSpace(n.Value)
	// big.Rat also reads fractions such as "1/3"; prices are decimals only.
	if s == "" || strings.ContainsAny(s, "/eEpPxX_") {
		return fmt.Errorf("line %d: price %q is not a plain decimal number", n.Line, n.Value)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() < 0 {
		return fmt.Errorf("line %d: price %q is not a non-negative decimal number", n.Line, n.Value)
	}
	d.text, d.rat = s, r
	return nil
}

// duration reads either a Go duration ("30s", "2m") or a number of seconds.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: timeout must be a duration such as 30s", n.Line)
	}
	if secs, err := strconv.ParseFloat(n.Value, 64); err == nil {
		if !(secs > 0 && secs <= 24*3600) {
			return fmt.Errorf("line %d: timeout %q is out of range", n.Line, n.Value)
		}
		*d = duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || v <= 0 || v > 24*time.Hour {
		return fmt.Errorf("line %d: timeout %q is not a positive duration such as 30s", n.Line, n.Value)
	}
	*d = duration(v)
	return nil
}

// parseFile decodes the providers file. Unknown keys are errors, so that a
// typo does not silently drop a setting.
func parseFile(data []byte) (*fileConfig, error) {
	var cfg fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return &cfg, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("the file must hold a single YAML document")
	}
	return &cfg, nil
}

// NormalizeProvider maps a provider name as app definitions write it to the
// key used in the registry: trimmed, lower case, and for Dify's plugin form
// "org/plugin/provider" only the last segment
// ("langgenius/openai/openai" becomes "openai").
func NormalizeProvider(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = strings.TrimSpace(name[i+1:])
	}
	return name
}

// priceUnits maps the accepted price_unit spellings to the fraction of a
// token one unit price stands for.
var priceUnits = map[string]string{"1k": "0.001", "1m": "0.000001"}

// settings is a validated provider entry, ready to build a backend from.
type settings struct {
	name        string
	names       []string
	backend     string
	baseURL     string
	apiKey      string
	apiKeyEnv   string // set when the key comes from an environment variable
	headers     map[string]string
	timeout     time.Duration
	maxRetries  int
	defaults    map[string]string
	voice       string
	extraParams map[string]bool
	models      map[string]modelSettings
	keywords    []string
}

// modelSettings is one validated `models` entry.
type modelSettings struct {
	real  string
	price *pricing
}

// validate checks one entry and applies defaults. getenv reads api_key_env.
func (pc providerConfig) validate(getenv func(string) string) (*settings, error) {
	s := &settings{
		name:        NormalizeProvider(pc.Name),
		backend:     strings.ToLower(strings.TrimSpace(pc.Backend)),
		baseURL:     strings.TrimSpace(pc.BaseURL),
		apiKey:      pc.APIKey,
		headers:     pc.Headers,
		timeout:     time.Duration(pc.Timeout),
		maxRetries:  DefaultMaxRetries,
		defaults:    map[string]string{},
		voice:       strings.TrimSpace(pc.Voice),
		extraParams: map[string]bool{},
		models:      map[string]modelSettings{},
		keywords:    pc.Keywords,
	}
	if s.name == "" {
		return nil, errors.New("name is required")
	}
	s.names = append(s.names, s.name)
	for _, a := range pc.Aliases {
		n := NormalizeProvider(a)
		if n == "" {
			return nil, errors.New("aliases: empty name")
		}
		if !contains(s.names, n) {
			s.names = append(s.names, n)
		}
	}
	switch s.backend {
	case "":
		s.backend = BackendOpenAICompatible
	case BackendOpenAICompatible, BackendBuiltin:
	default:
		return nil, fmt.Errorf("backend %q is not %q or %q", pc.Backend, BackendOpenAICompatible, BackendBuiltin)
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	if pc.MaxRetries != nil {
		if *pc.MaxRetries < 0 || *pc.MaxRetries > maxRetriesLimit {
			return nil, fmt.Errorf("max_retries must be between 0 and %d", maxRetriesLimit)
		}
		s.maxRetries = *pc.MaxRetries
	}
	if pc.APIKey != "" && pc.APIKeyEnv != "" {
		return nil, errors.New("give api_key or api_key_env, not both")
	}
	if pc.APIKeyEnv != "" {
		s.apiKeyEnv = pc.APIKeyEnv
		s.apiKey = getenv(pc.APIKeyEnv)
	}
	if s.backend == BackendOpenAICompatible {
		if s.baseURL == "" && s.name == "openai" {
			s.baseURL = defaultOpenAIURL
		}
		if s.baseURL == "" {
			return nil, errors.New("base_url is required for the openai-compatible backend")
		}
		u, err := url.Parse(s.baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("base_url %q is not an http(s) URL", s.baseURL)
		}
	} else if s.baseURL != "" || s.apiKey != "" || s.apiKeyEnv != "" {
		return nil, errors.New("the builtin backend takes no base_url or api key")
	}
	for k, v := range pc.Defaults {
		if !contains(modelTypes, k) {
			return nil, fmt.Errorf("defaults: %q is not one of %s", k, strings.Join(modelTypes, ", "))
		}
		s.defaults[k] = strings.TrimSpace(v)
	}
	for _, p := range pc.ExtraParams {
		p = strings.TrimSpace(p)
		if p == "" || reservedParams[p] {
			return nil, fmt.Errorf("extra_params: %q cannot be forwarded", p)
		}
		s.extraParams[p] = true
	}
	for k, v := range pc.Headers {
		if strings.EqualFold(k, "authorization") {
			return nil, errors.New("headers: set the key with api_key or api_key_env, not an Authorization header")
		}
		if !validHeaderName(k) || strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("headers: %q is not a valid header", k)
		}
	}

	unit, currency := "", strings.TrimSpace(pc.Currency)
	if pc.PriceUnit != "" {
		u, ok := priceUnits[strings.ToLower(strings.TrimSpace(pc.PriceUnit))]
		if !ok {
			return nil, fmt.Errorf("price_unit %q is not 1K or 1M", pc.PriceUnit)
		}
		unit = u
	}
	if unit == "" {
		unit = priceUnits["1m"]
	}
	if currency == "" {
		currency = DefaultCurrency
	}
	for name, mc := range pc.Models {
		key := strings.TrimSpace(name)
		if key == "" {
			return nil, errors.New("models: empty model name")
		}
		ms := modelSettings{real: strings.TrimSpace(mc.Model)}
		if ms.real == "" {
			ms.real = key
		}
		if mc.Input != nil || mc.Output != nil {
			ms.price = newPricing(mc.Input, mc.Output, unit, currency)
		}
		s.models[key] = ms
	}
	return s, nil
}

// validHeaderName reports whether name is an HTTP token (RFC 9110).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
