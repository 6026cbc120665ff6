package llm

import (
	"appkb/internal/platform/apperr"

	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestNormalizeProvider(t *testing.T) {
	tests := []struct{ in, want string }{
		{"openai", "openai"},
		{"OpenAI", "openai"},
		{"  ollama ", "ollama"},
		{"langgenius/openai/openai", "openai"},
		{"langgenius/ollama/ollama", "ollama"},
		{"LangGenius/OpenAI_API_Compatible/openai_api_compatible", "openai_api_compatible"},
		{"langgenius/siliconflow/siliconflow", "siliconflow"},
		{"", ""},
		{"a/", ""},
	}
	for _, tc := range tests {
		if got := NormalizeProvider(tc.in); got != tc.want {
			t.Errorf("NormalizeProvider(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

const sampleFile = `
providers:
  - name: openai
    base_url: http://127.0.0.1:9/v1
    api_key_env: MY_OPENAI_KEY
    defaults: {chat: gpt-4o-mini}
    models:
      gpt-4: {model: gpt-4o}
  - name: ollama
    aliases: [local-llama]
    base_url: http://127.0.0.1:11434/v1
  - name: offline
    backend: builtin
    keywords: [Forbidden]
`

func TestLookup(t *testing.T) {
	tests := []struct {
		name        string
		file        string
		env         func(string) string
		strict      bool
		provider    string
		wantBackend string
		wantCode    string
	}{
		{name: "configured name", file: sampleFile, env: env("MY_OPENAI_KEY", "k"), provider: "openai", wantBackend: BackendOpenAICompatible},
		{name: "long plugin name", file: sampleFile, env: env("MY_OPENAI_KEY", "k"), strict: true, provider: "langgenius/openai/openai", wantBackend: BackendOpenAICompatible},
		{name: "alias, any case", file: sampleFile, strict: true, provider: "Local-Llama", wantBackend: BackendOpenAICompatible},
		{name: "builtin entry", file: sampleFile, strict: true, provider: "offline", wantBackend: BackendBuiltin},
		{name: "unknown falls back to builtin", file: sampleFile, provider: "anthropic", wantBackend: BackendBuiltin},
		{name: "unknown in strict mode", file: sampleFile, strict: true, provider: "langgenius/anthropic/anthropic", wantCode: apperr.CodeProviderNotInitialize},
		{name: "empty name in strict mode", strict: true, provider: "", wantCode: apperr.CodeProviderNotInitialize},
		{name: "appkb is builtin even when strict", strict: true, provider: "appkb", wantBackend: BackendBuiltin},
		{name: "builtin is builtin even when strict", strict: true, provider: "BUILTIN", wantBackend: BackendBuiltin},
		{name: "openai from the environment", env: env("OPENAI_API_KEY", "k"), strict: true, provider: "openai", wantBackend: BackendOpenAICompatible},
		{name: "openai base URL alone", env: env("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"), strict: true, provider: "openai", wantBackend: BackendOpenAICompatible},
		{name: "no openai without file or environment", strict: true, provider: "openai", wantCode: apperr.CodeProviderNotInitialize},
		{name: "no file at all, not strict", provider: "openai", wantBackend: BackendBuiltin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.file), tc.env, tc.strict)
			if err != nil {
				t.Fatal(err)
			}
			backend, err := r.Backend(tc.provider)
			if tc.wantCode != "" {
				e := wantModelError(t, err, tc.wantCode)
				if tc.provider != "" && !strings.Contains(e.Message, tc.provider) {
					t.Errorf("message %q does not name the provider", e.Message)
				}
				if _, err := r.Chat(tc.provider, ""); err == nil {
					t.Errorf("Chat lookup succeeded")
				}
				return
			}
			if err != nil || backend != tc.wantBackend {
				t.Errorf("Backend(%q) = %q, %v; want %q", tc.provider, backend, err, tc.wantBackend)
			}
		})
	}
}

func TestFileEntryWinsOverEnvironment(t *testing.T) {
	r, err := Parse([]byte(sampleFile), env("MY_OPENAI_KEY", "file-key", "OPENAI_API_KEY", "env-key", "OPENAI_BASE_URL", "http://127.0.0.1:1/v1"), true)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := r.lookup("openai")
	if p.baseURL != "http://127.0.0.1:9/v1" || p.apiKey != "file-key" {
		t.Errorf("openai entry = %s %s, want the file's", p.baseURL, p.apiKey)
	}
}

func TestEnvironmentEntry(t *testing.T) {
	r, err := Parse(nil, env("OPENAI_API_KEY", "sk-env"), true)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := r.lookup("langgenius/openai/openai")
	if p.baseURL != defaultOpenAIURL || p.apiKey != "sk-env" || p.timeout != DefaultTimeout || p.maxRetries != DefaultMaxRetries {
		t.Errorf("entry = %+v", p.settings)
	}
	// No default chat model: the app must name one.
	if _, err := r.Chat("openai", ""); err != nil {
		wantModelError(t, err, apperr.CodeModelNotSupported)
	} else {
		t.Error("Chat without a model succeeded")
	}
	if _, err := r.Chat("openai", "gpt-4o"); err != nil {
		t.Error(err)
	}
}

func TestMissingKeyFromEnvironment(t *testing.T) {
	r, err := Parse([]byte(sampleFile), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Chat("openai", "")
	e := wantModelError(t, err, apperr.CodeProviderNotInitialize)
	if !strings.Contains(e.Message, "MY_OPENAI_KEY") {
		t.Errorf("message %q does not name the variable", e.Message)
	}
}

func TestResolveModel(t *testing.T) {
	r, err := Parse([]byte(sampleFile), env("MY_OPENAI_KEY", "k"), true)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := r.lookup("openai")
	tests := []struct{ in, want string }{
		{"", "gpt-4o-mini"},
		{"gpt-4", "gpt-4o"},
		{"gpt-4o", "gpt-4o"},
		{" o3 ", "o3"},
	}
	for _, tc := range tests {
		got, _, err := p.resolve(TypeChat, tc.in)
		if err != nil || got != tc.want {
			t.Errorf("resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, _, err := p.resolve(TypeEmbedding, ""); err == nil {
		t.Error("an embedding model resolved without a default")
	}
	if got, _, err := p.resolve(TypeChat, strings.Repeat("é", MaxModelName)); err != nil || got != strings.Repeat("é", MaxModelName) {
		t.Errorf("a name of %d characters: %q, %v", MaxModelName, got, err)
	}
	if _, _, err := p.resolve(TypeChat, strings.Repeat("m", MaxModelName+1)); apperr.From(err).Code != apperr.CodeModelNotSupported {
		t.Errorf("a name of %d characters: %v", MaxModelName+1, err)
	}
}

func TestNilRegistryIsBuiltin(t *testing.T) {
	var r *Registry
	if b, err := r.Backend("openai"); err != nil || b != BackendBuiltin {
		t.Errorf("Backend = %q, %v", b, err)
	}
	if _, err := r.Chat("openai", "gpt-4"); err != nil {
		t.Error(err)
	}
	if got := r.Providers(); strings.Join(got, ",") != "appkb,builtin" {
		t.Errorf("Providers = %v", got)
	}
}

func TestParseSettings(t *testing.T) {
	r, err := Parse([]byte(`
providers:
  - name: Acme
    base_url: https://llm.example/v1
    api_key: k
    timeout: 90
    max_retries: 0
    price_unit: 1k
    currency: EUR
    extra_params: [top_k]
    models:
      cheap: {input: 0.001, output: "0.002"}
`), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := r.lookup("acme")
	if p.timeout != 90*time.Second || p.maxRetries != 0 || !p.extraParams["top_k"] {
		t.Errorf("settings = %+v", p.settings)
	}
	_, price, _ := p.resolve(TypeChat, "cheap")
	u := makeUsage(price, 1500, 500, time.Second)
	want := Usage{PromptTokens: 1500, CompletionTokens: 500, TotalTokens: 2000,
		PromptUnitPrice: "0.001", PromptPriceUnit: "0.001", PromptPrice: "0.0015000",
		CompletionUnitPrice: "0.002", CompletionPriceUnit: "0.001", CompletionPrice: "0.0010000",
		TotalPrice: "0.0025000", Currency: "EUR", Latency: time.Second}
	if u != want {
		t.Errorf("usage = %+v\nwant    %+v", u, want)
	}
	// 1 token at 0.15 per million is 0.00000015: rounded half up to 7 places.
	perMillion := newPricing(&decimal{"0.15", big.NewRat(15, 100)}, nil, priceUnits["1m"], "USD")
	if u := makeUsage(perMillion, 1, 0, 0); u.PromptPrice != "0.0000002" || u.CompletionPrice != "0.0000000" || u.TotalPrice != "0.0000002" {
		t.Errorf("rounded usage = %+v", u)
	}
	if u := makeUsage(nil, 3, 4, 0); u.PromptPrice != "" || u.TotalPrice != "" || u.Currency != "" || u.TotalTokens != 7 {
		t.Errorf("usage without prices = %+v", u)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"not YAML", "providers: [", "yaml"},
		{"unknown key", "providers:\n  - {name: a, base_url: 'http://x', temprature: 1}", "temprature"},
		{"unknown top-level key", "provider: []", "provider"},
		{"no name", "providers:\n  - {base_url: 'http://x'}", "name is required"},
		{"bad backend", "providers:\n  - {name: a, backend: anthropic}", "backend"},
		{"no base URL", "providers:\n  - {name: a}", "base_url is required"},
		{"base URL without scheme", "providers:\n  - {name: a, base_url: 'localhost:11434'}", "not an http(s) URL"},
		{"duplicate name", "providers:\n  - {name: a, base_url: 'http://x'}\n  - {name: A, base_url: 'http://y'}", "configured twice"},
		{"duplicate alias", "providers:\n  - {name: a, base_url: 'http://x'}\n  - {name: b, aliases: [x/y/a], base_url: 'http://y'}", "configured twice"},
		{"key twice", "providers:\n  - {name: a, base_url: 'http://x', api_key: k, api_key_env: K}", "not both"},
		{"negative retries", "providers:\n  - {name: a, base_url: 'http://x', max_retries: -1}", "max_retries"},
		{"too many retries", "providers:\n  - {name: a, base_url: 'http://x', max_retries: 99}", "max_retries"},
		{"bad timeout", "providers:\n  - {name: a, base_url: 'http://x', timeout: soon}", "timeout"},
		{"zero timeout", "providers:\n  - {name: a, base_url: 'http://x', timeout: 0s}", "timeout"},
		{"bad price", "providers:\n  - {name: a, base_url: 'http://x', models: {m: {input: cheap}}}", "price"},
		{"negative price", "providers:\n  - {name: a, base_url: 'http://x', models: {m: {input: -1}}}", "price"},
		{"fraction price", "providers:\n  - {name: a, base_url: 'http://x', models: {m: {input: 1/3}}}", "price"},
		{"bad price unit", "providers:\n  - {name: a, base_url: 'http://x', price_unit: 1G}", "price_unit"},
		{"builtin with URL", "providers:\n  - {name: a, backend: builtin, base_url: 'http://x'}", "builtin"},
		{"bad default type", "providers:\n  - {name: a, base_url: 'http://x', defaults: {llm: m}}", "defaults"},
		{"reserved extra param", "providers:\n  - {name: a, base_url: 'http://x', extra_params: [messages]}", "extra_params"},
		{"authorization header", "providers:\n  - {name: a, base_url: 'http://x', headers: {authorization: k}}", "headers"},
		{"two documents", "providers: []\n---\nproviders: []", "single YAML document"},
		{"bad OPENAI_BASE_URL", "", "OPENAI_BASE_URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), env("OPENAI_BASE_URL", "ftp://nowhere"), false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil, false); err == nil {
		t.Error("Load of a missing file succeeded")
	}
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("providers:\n  - {name: a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, nil, false); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want one naming the file", err)
	}
	r, err := Load("", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := r.Backend("appkb"); b != BackendBuiltin {
		t.Errorf("appkb backend = %q", b)
	}
}

func TestExampleFileLoads(t *testing.T) {
	r, err := Load("providers.example.yaml", env("OPENAI_API_KEY", "sk-x", "VLLM_API_KEY", "v", "DEEPSEEK_API_KEY", "d", "SILICONFLOW_API_KEY", "s"), true)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ provider, backend string }{
		{"langgenius/openai/openai", BackendOpenAICompatible},
		{"langgenius/openai_api_compatible/openai_api_compatible", BackendOpenAICompatible},
		{"langgenius/ollama/ollama", BackendOpenAICompatible},
		{"deepseek", BackendOpenAICompatible},
		{"siliconflow", BackendOpenAICompatible},
		{"local", BackendBuiltin},
		{"appkb", BackendBuiltin},
	}
	for _, w := range want {
		if b, err := r.Backend(w.provider); err != nil || b != w.backend {
			t.Errorf("Backend(%q) = %q, %v; want %q", w.provider, b, err, w.backend)
		}
	}
	p, _ := r.lookup("openai")
	name, price, err := p.resolve(TypeChat, "gpt-4")
	if err != nil || name != "gpt-4o" || price == nil || price.inputText != "2.50" {
		t.Errorf("gpt-4 resolves to %q with %+v, %v", name, price, err)
	}
}
