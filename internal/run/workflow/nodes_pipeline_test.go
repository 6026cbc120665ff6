package workflow

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeIndexer records what knowledge-index nodes hand over.
type fakeIndexer struct {
	source  map[string]any
	failSrc bool
	got     []IndexRequest
}

func (f *fakeIndexer) Source(_ context.Context, n DatasourceNode) (map[string]any, error) {
	if f.failSrc {
		return nil, errors.New("no such file")
	}
	if n.ProviderType != "website_crawl" {
		return nil, errors.New("wrong provider type " + n.ProviderType)
	}
	return f.source, nil
}

func (f *fakeIndexer) Index(_ context.Context, req IndexRequest) (map[string]any, error) {
	f.got = append(f.got, req)
	return map[string]any{"document_id": "d1"}, nil
}

const pipelineGraph = `
graph:
  nodes:
  - {id: web, data: {type: datasource, title: Web, provider_type: website_crawl}}
  - id: shape
    data:
      type: template-transform
      title: Shape
      variables:
      - {variable: c, value_selector: [web, content]}
      - {variable: p, value_selector: [rag, shared, prefix]}
      template: "{{ p }} {{ c }}"
  - {id: index, data: {type: knowledge-index, title: Index, chunk_structure: text_model, indexing_technique: economy, index_chunk_variable_selector: [shape, output]}}
  edges:
  - {source: web, target: shape}
  - {source: shape, target: index}
`

func TestPipelineNodes(t *testing.T) {
	tests := []struct {
		name       string
		knowledge  *fakeIndexer
		wantStatus string
		wantChunks any
		wantError  string
	}{
		{"source through a template into the index", &fakeIndexer{source: map[string]any{"content": "page text"}}, RunSucceeded, "Note: page text", ""},
		{"a source that fails names the node", &fakeIndexer{failSrc: true}, RunFailed, nil, `"Web" (web) failed: no such file`},
		{"without a knowledge indexer", nil, RunFailed, nil, "runs only in a knowledge pipeline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := CompileFrom(graphYAML(t, pipelineGraph), "web")
			if err != nil {
				t.Fatal(err)
			}
			e := &Engine{}
			if tc.knowledge != nil {
				e.Knowledge = tc.knowledge
			}
			res, _ := run1(t, e, RunInput{Graph: g, PipelineVariables: map[string]map[string]any{"shared": {"prefix": "Note:"}}})
			if res.Status != tc.wantStatus || !strings.Contains(res.Error, tc.wantError) {
				t.Fatalf("status %s, error %q", res.Status, res.Error)
			}
			if tc.wantChunks != nil {
				if len(tc.knowledge.got) != 1 || tc.knowledge.got[0].Chunks != tc.wantChunks || tc.knowledge.got[0].IndexingTechnique != "economy" {
					t.Fatalf("index requests %+v", tc.knowledge.got)
				}
			}
		})
	}
}

func TestCompileFromUnknownRoot(t *testing.T) {
	if _, err := CompileFrom(graphYAML(t, pipelineGraph), "nope"); err == nil {
		t.Fatal("a missing root compiled")
	}
}
