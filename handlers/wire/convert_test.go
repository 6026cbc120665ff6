package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"appkb/gen"
	"appkb/internal/apps"
	"appkb/internal/conversation/conversations"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/pipeline"
	"appkb/internal/knowledge/retrieval"
	"appkb/internal/knowledge/textsplit"
	"appkb/models"
)

// viaJSON is the JSON round trip the converters replace: encode the
// domain value, decode it into the wire type.
func viaJSON[T any](t *testing.T, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameJSON fails unless both values encode to the same bytes.
func sameJSON(t *testing.T, name string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", name, g, w)
	}
}

// The explicit converters answer byte for byte what the JSON round trip
// answered, for values with every optional field unset and set.
func TestConvertersMatchTheJSONRoundTrip(t *testing.T) {
	n, s := int64(1_700_000_123), "someone"
	child := documents.ChildChunk{ID: "c1", SegmentID: "s1", Content: "child", Position: 2, WordCount: 5, Type: "automatic", CreatedAt: 10, UpdatedAt: 11}
	segs := []struct {
		name string
		seg  documents.Segment
	}{
		{"bare", documents.Segment{ID: "s1", Content: "text"}},
		{"full", documents.Segment{ID: "s2", Position: 3, DocumentID: "d1", Content: "q", SignContent: "q", Answer: "a",
			WordCount: 9, Tokens: 4, Keywords: []string{"k1", "k2"}, IndexNodeID: "n1", IndexNodeHash: "h1", HitCount: 7,
			Enabled: true, DisabledAt: &n, DisabledBy: &s, Status: "completed", CreatedBy: "key", CreatedAt: n, UpdatedAt: n + 1,
			UpdatedBy: &s, IndexingAt: &n, CompletedAt: &n, Error: &s, StoppedAt: &n,
			ChildChunks: []documents.ChildChunk{child}, Attachments: []any{}, Summary: &s}},
		{"empty lists", documents.Segment{ID: "s3", Keywords: []string{}, ChildChunks: []documents.ChildChunk{}, Attachments: []any{}}},
	}
	for _, tc := range segs {
		sameJSON(t, "segment "+tc.name, segmentOf(tc.seg), viaJSON[gen.Segment](t, tc.seg))
		detail := &documents.SegmentDetail{Data: tc.seg, DocForm: "text_model"}
		sameJSON(t, "detail "+tc.name, SegmentDetail(detail), viaJSON[gen.SegmentDetail](t, detail))
	}
	for _, list := range []*documents.SegmentList{
		{},
		{Data: []documents.Segment{segs[0].seg, segs[1].seg}, DocForm: "qa_model", Total: 2, HasMore: true, Limit: 20, Page: 1},
	} {
		sameJSON(t, "segment list", SegmentList(list), viaJSON[gen.SegmentList](t, list))
	}
	for _, page := range []*documents.ChildChunkPage{{}, {Data: []documents.ChildChunk{child}, Total: 1, TotalPages: 1, Page: 1, Limit: 20}} {
		sameJSON(t, "child page", ChildPage(page), viaJSON[gen.ChildChunkList](t, page))
	}

	tags := []datasets.Tag{{ID: "t1", Name: "one", Type: "knowledge", BindingCount: "2"}, {ID: "t2", Name: "two"}}
	sameJSON(t, "tag", Tag(&tags[0]), viaJSON[gen.KnowledgeTag](t, tags[0]))
	sameJSON(t, "tags", Tags(tags), viaJSON[[]gen.KnowledgeTag](t, tags))
	refs := []datasets.TagRef{{ID: "t1", Name: "one"}}
	sameJSON(t, "tag refs", TagRefs(refs), viaJSON[[]gen.DatasetTagRef](t, refs))
	sameJSON(t, "no tags", Tags(nil), []gen.KnowledgeTag{})
	for _, l := range []*datasets.MetadataList{{}, {BuiltInFieldEnabled: true, DocMetadata: []datasets.MetadataUsage{}},
		{DocMetadata: []datasets.MetadataUsage{{MetadataField: datasets.MetadataField{ID: "m", Name: "author", Type: "string"}, Count: 3}}}} {
		sameJSON(t, "metadata", MetadataList(l), viaJSON[gen.MetadataFieldList](t, l))
	}

	for _, info := range []apps.AppInfo{{Name: "a", Mode: "chat"}, {Name: "b", Description: "d", Tags: []string{}, Mode: "workflow", AuthorName: &s}} {
		sameJSON(t, "app info", AppInfo(info), viaJSON[gen.AppInfoResponse](t, info))
	}

	size, url := int64(2048), "https://x/f"
	fileSets := [][]conversations.MessageFile{nil, {}, {{ID: "f"}, {ID: "g", Filename: "a.png", Type: "image", URL: &url, MimeType: &url,
		Size: &size, TransferMethod: "local_file", BelongsTo: &s, UploadFileID: &s}}}
	for _, fs := range fileSets {
		sameJSON(t, "message files", messageFilesOf(fs), viaJSON[[]gen.MessageFileItem](t, fs))
	}
	resSets := [][]conversations.RetrieverResource{nil, {}, {{ID: "r"}, {ID: "r2", MessageID: "m", Position: 1, DatasetID: "d", DatasetName: "n",
		DocumentID: "doc", DocumentName: "dn", DataSourceType: "upload_file", SegmentID: "s", Score: 0.123456789012, HitCount: 3,
		WordCount: 40, SegmentPosition: 2, IndexNodeHash: "h", Content: "c", Summary: &s, CreatedAt: n}, {ID: "r3", Score: 0.7}}}
	for _, rs := range resSets {
		sameJSON(t, "retriever resources", retrieverResourcesOf(rs), viaJSON[[]gen.RetrieverResource](t, rs))
	}
	thoughtSets := [][]conversations.AgentThought{nil, {}, {{ID: "a"}, {ID: "b", ChainID: &s, MessageID: "m", Position: 1, Thought: "t",
		Tool: "tool", ToolLabels: map[string]any{"tool": map[string]any{"en_US": "Tool"}}, ToolInput: "{}", Observation: "o",
		Files: []string{"f1"}, CreatedAt: n}, {ID: "c", ToolLabels: map[string]any{}, Files: []string{}}}}
	for _, ts := range thoughtSets {
		sameJSON(t, "agent thoughts", agentThoughtsOf(ts), viaJSON[[]gen.AgentThoughtItem](t, ts))
	}

	mime := "text/plain"
	for _, f := range []*pipeline.UploadedFile{{ID: "u"}, {ID: "u2", Name: "a.txt", Size: 12, Extension: "txt", MimeType: &mime, CreatedBy: "k", CreatedAt: &s}} {
		sameJSON(t, "pipeline upload", PipelineUpload(f), viaJSON[gen.PipelineFileUploadResult](t, f))
	}
	for _, l := range [][]pipeline.Datasource{nil, {}, {{NodeID: "n"}, {NodeID: "m", PluginID: "p", ProviderName: "web", DatasourceType: "website_crawl",
		Title: "Web", UserInputVariables: []map[string]any{{"variable": "url", "required": true}}, Credentials: []any{}}}} {
		sameJSON(t, "datasources", Datasources(l), viaJSON[[]gen.DatasourcePlugin](t, l))
	}

	v := "2024"
	docs := []documents.Document{{ID: "d"}, {ID: "d2", Position: 2, DataSourceType: "upload_file", DataSourceInfo: map[string]any{"upload_file_id": "u"},
		DataSourceDetailDict: map[string]any{}, DatasetProcessRuleID: "r", DocumentState: documents.DocumentState{Name: "a.txt", CreatedFrom: "api", CreatedBy: "k", CreatedAt: n,
			Tokens: 5, IndexingStatus: "completed", Error: &s, Enabled: true, DisabledAt: &n, DisabledBy: &s, Archived: true,
			DisplayStatus: "available", WordCount: 9, HitCount: 1, DocForm: "text_model"},
		DocMetadata:        []documents.MetadataValue{{ID: "m", Name: "year", Type: "number", Value: &v}, {ID: "x", Name: "n", Type: "string"}},
		SummaryIndexStatus: &s, NeedSummary: true}, {ID: "d3", DocMetadata: []documents.MetadataValue{}}}
	for i := range docs {
		c := &documents.Created{Document: docs[i], Batch: "b"}
		sameJSON(t, "created", Created(c), viaJSON[gen.DocumentCreatedResult](t, c))
	}
	for _, p := range []*documents.DocumentPage{{}, {Data: docs, HasMore: true, Limit: 20, Total: 3, Page: 1}} {
		sameJSON(t, "document page", DocumentPage(p), viaJSON[gen.DocumentList](t, p))
	}

	at := time.Unix(n, 0)
	stored := models.Segment{ID: "s9", DocumentID: "d9", Content: "found", Position: 1, Keywords: `["x"]`, Enabled: true,
		Status: "completed", CreatedAt: at, UpdatedAt: at, IndexingAt: &at, CompletedAt: &at}
	hits := []retrieval.Hit{
		{Segment: stored, Document: retrieval.DocumentSummary{ID: "d9", Name: "doc", DataSourceType: "upload_file"}, Score: 0.5},
		{Segment: stored, Document: retrieval.DocumentSummary{ID: "d9", Name: "doc", Metadata: map[string]any{"author": "x", "year": 2024}},
			Score: 0.25, ChildChunks: []retrieval.ChildHit{{ID: "c", Content: "part", Position: 1, Score: 0.75}}},
	}
	for _, h := range hits {
		// What the retrieve answer was built from before.
		seg := h.Segment
		children := make([]map[string]any, len(h.ChildChunks))
		for i, c := range h.ChildChunks {
			children[i] = map[string]any{"id": c.ID, "content": c.Content, "position": c.Position, "score": c.Score}
		}
		old := map[string]any{"score": h.Score, "files": []any{}, "tsne_position": nil, "summary": nil, "child_chunks": children,
			"segment": struct {
				documents.Segment
				Document map[string]any `json:"document"`
			}{documents.SegmentView(&seg), map[string]any{"id": h.Document.ID, "data_source_type": h.Document.DataSourceType,
				"name": h.Document.Name, "doc_type": nil, "doc_metadata": h.Document.Metadata}}}
		sameJSON(t, "hit", Hit(h), viaJSON[gen.RetrieveRecord](t, old))
	}
}

// The cost of shaping one search hit for the wire, through the converter
// and through the JSON round trip it replaced.
func BenchmarkWireHit(b *testing.B) {
	at := time.Unix(1_700_000_000, 0)
	h := retrieval.Hit{Segment: models.Segment{ID: "s", DocumentID: "d", Content: strings.Repeat("text ", 100), Keywords: `["a","b"]`,
		Enabled: true, Status: "completed", CreatedAt: at, UpdatedAt: at, IndexingAt: &at, CompletedAt: &at},
		Document: retrieval.DocumentSummary{ID: "d", Name: "doc", DataSourceType: "upload_file", Metadata: map[string]any{"author": "x"}}, Score: 0.5}
	b.Run("converter", func(b *testing.B) {
		for range b.N {
			if _, err := json.Marshal(Hit(h)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json round trip", func(b *testing.B) {
		for range b.N {
			seg := h.Segment
			old := map[string]any{"score": h.Score, "files": []any{}, "child_chunks": []any{}, "segment": struct {
				documents.Segment
				Document map[string]any `json:"document"`
			}{documents.SegmentView(&seg), map[string]any{"id": h.Document.ID, "name": h.Document.Name, "doc_metadata": h.Document.Metadata}}}
			out, err := toWire[gen.RetrieveRecord](old)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The request-side search settings read as the JSON round trip read them,
// from bodies that leave every optional part out and that set all of it.
func TestDomainRetrievalModelMatchesTheJSONRoundTrip(t *testing.T) {
	bodies := []struct{ name, body string }{
		{"bare", `{"search_method":"semantic_search","reranking_enable":false,"top_k":3,"score_threshold_enabled":false}`},
		{"nulls", `{"search_method":"keyword_search","reranking_enable":false,"reranking_mode":null,"reranking_model":null,
			"top_k":2,"score_threshold_enabled":true,"score_threshold":null,"weights":null}`},
		{"empty parts", `{"search_method":"hybrid_search","reranking_enable":true,"reranking_model":{},"top_k":1,
			"score_threshold_enabled":true,"score_threshold":0,"weights":{},"metadata_filtering_conditions":{"conditions":[]}}`},
		{"full", `{"search_method":"hybrid_search","reranking_enable":true,"reranking_mode":"weighted_score",
			"reranking_model":{"reranking_provider_name":"cohere","reranking_model_name":"rerank-3"},"top_k":7,
			"score_threshold_enabled":true,"score_threshold":0.25,
			"weights":{"weight_type":"customized","vector_setting":{"vector_weight":0.7,"embedding_provider_name":"openai",
			"embedding_model_name":"text-embedding-3-small"},"keyword_setting":{"keyword_weight":0.3}},
			"metadata_filtering_conditions":{"logical_operator":"or","conditions":[
			{"name":"author","comparison_operator":"is","value":"ann"},
			{"name":"year","comparison_operator":">","value":2020.5},
			{"name":"tags","comparison_operator":"in","value":["a","b"]},
			{"name":"draft","comparison_operator":"empty"}]}}`},
	}
	for _, tc := range bodies {
		t.Run(tc.name, func(t *testing.T) {
			var rm gen.RetrievalModel
			if err := json.Unmarshal([]byte(tc.body), &rm); err != nil {
				t.Fatal(err)
			}
			got, err := DomainRetrievalModel(&rm)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, tc.name, got, viaJSON[datasets.RetrievalModel](t, &rm))
		})
	}
	var b gen.CreateDatasetRequest
	for _, body := range []string{`{"name":"x","summary_index_setting":{}}`,
		`{"name":"x","summary_index_setting":{"enable":true,"model_name":"m","model_provider_name":"p","summary_prompt":"sum it"}}`} {
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatal(err)
		}
		si := b.SummaryIndexSetting
		sameJSON(t, body, DomainSummaryIndexSetting(si.Enable, si.ModelName, si.ModelProviderName, si.SummaryPrompt),
			viaJSON[datasets.SummaryIndexSetting](t, si))
	}
}

// The request's process rule reads as the JSON round trip read it.
func TestDomainProcessRuleMatchesTheJSONRoundTrip(t *testing.T) {
	for _, body := range []string{
		`{"mode":"automatic"}`,
		`{"mode":"custom","rules":{}}`,
		`{"mode":"custom","rules":{"pre_processing_rules":[],"segmentation":{}}}`,
		`{"mode":"custom","rules":{"pre_processing_rules":[{"id":"remove_extra_spaces","enabled":true},{"id":"remove_urls_emails"},{}],
			"segmentation":{"separator":"\n\n","max_tokens":300,"chunk_overlap":20}}}`,
		`{"mode":"hierarchical","rules":{"parent_mode":"paragraph","segmentation":{"separator":"###","max_tokens":800},
			"subchunk_segmentation":{"separator":"\n","max_tokens":120,"chunk_overlap":0}}}`,
	} {
		var rule gen.ProcessRule
		if err := json.Unmarshal([]byte(body), &rule); err != nil {
			t.Fatal(err)
		}
		sameJSON(t, body, DomainProcessRule(&rule), viaJSON[textsplit.ProcessRule](t, &rule))
	}
}
