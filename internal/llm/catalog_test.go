package llm

import (
	"reflect"
	"testing"
)

func TestCatalog(t *testing.T) {
	const file = `
providers:
  - name: openai
    base_url: http://127.0.0.1:9/v1
    api_key_env: MY_OPENAI_KEY
    defaults: {chat: gpt-4o-mini, embedding: text-embedding-3-small}
  - name: ollama
    aliases: [local-llama]
    base_url: http://127.0.0.1:11434/v1
    defaults: {embedding: nomic-embed-text, rerank: bge-reranker}
  - name: offline
    backend: builtin
    defaults: {embedding: tiny}
`
	type entry struct {
		Provider string
		Ready    bool
		Models   []string
	}
	tests := []struct {
		name string
		file string
		env  func(string) string
		typ  string
		want []entry
	}{
		{"no configuration: only the builtin provider", "", nil, TypeEmbedding,
			[]entry{{"appkb", true, []string{BuiltinEmbeddingModel}}}},
		{"builtin rerank", "", nil, TypeRerank,
			[]entry{{"appkb", true, []string{"builtin"}}}},
		{"builtin has no speech models", "", nil, TypeTextToSpeech, nil},
		{"defaults name the models of remote providers", file, env("MY_OPENAI_KEY", "k"), TypeEmbedding, []entry{
			{"appkb", true, []string{BuiltinEmbeddingModel}},
			{"offline", true, []string{"tiny"}},
			{"ollama", true, []string{"nomic-embed-text"}},
			{"openai", true, []string{"text-embedding-3-small"}},
		}},
		{"providers without a default for the type are left out", file, env("MY_OPENAI_KEY", "k"), TypeRerank, []entry{
			{"appkb", true, []string{"builtin"}},
			{"offline", true, []string{"builtin"}},
			{"ollama", true, []string{"bge-reranker"}},
		}},
		{"a provider whose key is missing is listed as not ready", file, nil, TypeChat, []entry{
			{"appkb", true, []string{"builtin"}},
			{"offline", true, []string{"builtin"}},
			{"openai", false, []string{"gpt-4o-mini"}},
		}},
		{"a file that takes over the name appkb", "providers:\n  - name: appkb\n    base_url: http://127.0.0.1:9/v1\n    defaults: {embedding: e5}\n", nil, TypeEmbedding, []entry{
			{"appkb", true, []string{"e5"}},
			{"builtin", true, []string{BuiltinEmbeddingModel}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.file), tc.env, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []entry
			for _, p := range r.Catalog(tc.typ) {
				got = append(got, entry{p.Provider, p.Ready, p.Models})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Catalog(%s) = %+v, want %+v", tc.typ, got, tc.want)
			}
		})
	}
	var nilRegistry *Registry
	if got := nilRegistry.Catalog(TypeEmbedding); len(got) != 1 || got[0].Provider != "appkb" {
		t.Errorf("nil registry: %+v", got)
	}
}
