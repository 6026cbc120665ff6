package llm

import (
	"appkb/internal/platform/apperr"

	"os"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary files to the providers loader. It must never
// panic, and whatever it accepts must give models for every name it lists
// (or clean errors), without any network traffic.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("providers.example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example),
		sampleFile,
		"",
		"providers: []",
		"providers:\n  - {name: a, base_url: 'http://127.0.0.1:1/v1', timeout: 1.5, max_retries: 3}",
		"providers:\n  - {name: b, backend: builtin, keywords: [x]}",
		"providers:\n  - {name: c, base_url: 'http://h', models: {m: {model: n, input: 0.1, output: '2'}}, defaults: {chat: m}}",
		"providers:\n  - &a {name: d, base_url: 'http://h'}\n  - *a",
		"providers:\n  - {name: e, base_url: 'http://h', headers: {X-A: b}, price_unit: 1K}",
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, strict bool) {
		r, err := Parse(data, env("OPENAI_API_KEY", "k", "KEY", "v"), strict)
		if err != nil {
			if r != nil {
				t.Fatal("Parse returned a registry and an error")
			}
			return
		}
		names := append(r.Providers(), "unknown", "langgenius/openai/openai", "")
		for _, name := range names {
			for _, model := range []string{"", "m", "gpt-4"} {
				checkLookup(t, name, model, func() error { _, err := r.Chat(name, model); return err })
				checkLookup(t, name, model, func() error { _, err := r.Embedding(name, model); return err })
				checkLookup(t, name, model, func() error { _, err := r.Rerank(name, model); return err })
				checkLookup(t, name, model, func() error { _, err := r.SpeechToText(name, model); return err })
				checkLookup(t, name, model, func() error { _, err := r.TextToSpeech(name, model); return err })
				checkLookup(t, name, model, func() error { _, err := r.Moderation(name, model); return err })
			}
		}
	})
}

// checkLookup accepts success or one of the package's own errors.
func checkLookup(t *testing.T, provider, model string, lookup func() error) {
	t.Helper()
	err := lookup()
	if err == nil {
		return
	}
	for _, code := range []string{apperr.CodeProviderNotInitialize, apperr.CodeModelNotSupported} {
		if strings.Contains(err.Error(), code) {
			return
		}
	}
	t.Fatalf("lookup %q/%q: unexpected error %v", provider, model, err)
}
