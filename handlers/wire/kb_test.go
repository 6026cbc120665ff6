package wire

import (
	"encoding/json"
	"testing"

	"appkb/gen"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/pipeline"
)

// oracle is what the knowledge answers were built with before their
// converters: the JSON round trip of toWire.
func oracle[T any](t *testing.T, v any) T {
	t.Helper()
	out, err := toWire[T](v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Knowledge bases, their pages, batch progress and pipeline results encode
// as the JSON round trip encoded them, for bare and fully set values.
func TestKnowledgeConvertersMatchToWire(t *testing.T) {
	s, f, n, yes := "x", 0.5, int64(1_700_000_321), true
	members, noMembers := []string{"k1", "k2"}, []string(nil)
	hybrid := datasets.RetrievalModel{SearchMethod: "hybrid_search", RerankingEnable: true, RerankingMode: &s,
		RerankingModel: &datasets.RerankingModel{ProviderName: "p", ModelName: "m"}, TopK: 4,
		ScoreThresholdEnabled: true, ScoreThreshold: &f,
		Weights: &datasets.Weights{WeightType: &s, VectorSetting: &datasets.VectorSetting{VectorWeight: &f,
			EmbeddingProviderName: &s, EmbeddingModelName: &s}, KeywordSetting: &datasets.KeywordSetting{KeywordWeight: &f}},
		MetadataFilteringConditions: &datasets.MetadataFilter{LogicalOperator: &s, Conditions: []datasets.MetadataCondition{
			{Name: "a", ComparisonOperator: "is", Value: "v"}, {Name: "b", ComparisonOperator: ">", Value: 2.5},
			{Name: "c", ComparisonOperator: "in", Value: []any{"x", "y"}}, {Name: "d", ComparisonOperator: "empty"},
			{Name: "e", ComparisonOperator: "in", Value: []string(nil)}, {Name: "f", ComparisonOperator: "is", Value: ""}}}}
	models := []datasets.RetrievalModel{{}, hybrid,
		{SearchMethod: "semantic_search", Weights: &datasets.Weights{VectorSetting: &datasets.VectorSetting{}, KeywordSetting: &datasets.KeywordSetting{}},
			MetadataFilteringConditions: &datasets.MetadataFilter{}},
		{MetadataFilteringConditions: &datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{}}}}
	var sets []datasets.Dataset
	for _, rm := range models {
		sets = append(sets, datasets.Dataset{ID: "bare", RetrievalModelDict: rm})
	}
	sets = append(sets,
		datasets.Dataset{ID: "d", Name: "kb", Description: "about", Provider: "vendor", Permission: "partial_members",
			DataSourceType: "upload_file", IndexingTechnique: &s, AppCount: 1, DocumentCount: 2, WordCount: 3,
			CreatedBy: "key", AuthorName: "appkb", CreatedAt: n, UpdatedBy: "key2", UpdatedAt: n + 1,
			EmbeddingModel: "e", EmbeddingModelProvider: "ep", EmbeddingAvailable: true, RetrievalModelDict: hybrid,
			SummaryIndexSetting: &datasets.SummaryIndexSetting{Enable: &yes, ModelName: &s, ModelProviderName: &s, SummaryPrompt: &s},
			Tags:                []datasets.DatasetTag{{ID: "t", Name: "tag", Type: "knowledge"}, {ID: "u"}},
			DocForm:             "text_model", ExternalKnowledgeInfo: &struct{}{}, ExternalRetrievalModel: &struct{}{},
			DocMetadata: []datasets.MetadataField{{ID: "m", Name: "author", Type: "string"}}, BuiltInFieldEnabled: true,
			PipelineID: &s, RuntimeMode: &s, ChunkStructure: &s, IconInfo: &struct{}{}, IsPublished: true,
			TotalDocuments: 5, TotalAvailableDocuments: 4, EnableAPI: true, IsMultimodal: true, Maintainer: &s,
			PartialMemberList: &members},
		datasets.Dataset{ID: "empty lists", Tags: []datasets.DatasetTag{}, DocMetadata: []datasets.MetadataField{},
			SummaryIndexSetting: &datasets.SummaryIndexSetting{}, PartialMemberList: &[]string{}},
		datasets.Dataset{ID: "null members", PartialMemberList: &noMembers})
	for i := range sets {
		d := &sets[i]
		sameJSON(t, "dataset "+d.ID, Dataset(d), oracle[gen.Dataset](t, d))
	}
	for _, p := range []*datasets.Page{{}, {Data: []datasets.Dataset{}}, {Data: sets, HasMore: true, Limit: 20, Total: 9, Page: 2}} {
		sameJSON(t, "dataset page", DatasetPage(p), oracle[gen.DatasetList](t, p))
	}

	for _, list := range [][]documents.IndexingStatus{nil, {}, {{ID: "bare"}, {ID: "full", IndexingStatus: "completed",
		ProcessingStartedAt: &n, ParsingCompletedAt: &n, CleaningCompletedAt: &n, SplittingCompletedAt: &n, CompletedAt: &n,
		PausedAt: &n, Error: &s, StoppedAt: &n, CompletedSegments: 3, TotalSegments: 4}}} {
		sameJSON(t, "indexing status", IndexingStatuses(list), oracle[gen.IndexingStatusList](t, map[string]any{"data": list}))
	}

	for _, r := range []*pipeline.Result{{}, {TaskID: "t", WorkflowRunID: "w", Data: map[string]any{"id": "w", "outputs": nil,
		"elapsed_time": 0.25, "total_tokens": 12, "created_at": n, "error": "boom",
		"documents": []map[string]any{{"id": "d", "position": 1}}}}, {Data: map[string]any{}}} {
		sameJSON(t, "pipeline result", PipelineResult(r), oracle[gen.PipelineRunResult](t, r))
	}
}

// datasource_info_list reads as the JSON round trip read it, and an entry
// that is no object fails with the same message.
func TestDomainSourcesMatchToWire(t *testing.T) {
	for _, body := range []string{`null`, `[]`, `[{"name":"a.txt","extra":{"k":[1,2]}},null,{}]`, `[{"a":1},"text"]`, `[7,{"b":true}]`} {
		var list []gen.PipelineRunRequest_DatasourceInfoList_Item
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatal(err)
		}
		got, gerr := DomainSources(list)
		want, werr := toWire[[]map[string]any](list)
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Fatalf("%s: error %v, want %v", body, gerr, werr)
		}
		if werr == nil {
			sameJSON(t, "sources "+body, got, want)
			if (got == nil) != (want == nil) {
				t.Errorf("%s: nil %v, want %v", body, got == nil, want == nil)
			}
		}
	}
}
