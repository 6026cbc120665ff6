package handlers

import (
	"encoding/json"

	"appkb/gen"
	"appkb/internal/knowledge/datasets"
)

// Tags and metadata fields of knowledge bases, domain → wire.

func wireTag(t *datasets.Tag) gen.KnowledgeTag {
	return gen.KnowledgeTag{Id: t.ID, Name: t.Name, Type: &t.Type, BindingCount: &t.BindingCount}
}

// wireTags lists tags; no tags is an empty list.
func wireTags(list []datasets.Tag) []gen.KnowledgeTag {
	out := make([]gen.KnowledgeTag, len(list))
	for i := range list {
		out[i] = wireTag(&list[i])
	}
	return out
}

// wireTagRefs lists the tags of a knowledge base; none is an empty list.
func wireTagRefs(list []datasets.TagRef) []gen.DatasetTagRef {
	out := make([]gen.DatasetTagRef, len(list))
	for i, t := range list {
		out[i] = gen.DatasetTagRef{Id: t.ID, Name: t.Name}
	}
	return out
}

func wireMetadataList(l *datasets.MetadataList) gen.MetadataFieldList {
	out := gen.MetadataFieldList{BuiltInFieldEnabled: &l.BuiltInFieldEnabled}
	if l.DocMetadata != nil {
		fields := make([]gen.MetadataFieldUsage, len(l.DocMetadata))
		for i, f := range l.DocMetadata {
			count := f.Count
			fields[i] = gen.MetadataFieldUsage{Id: f.ID, Name: f.Name, Type: f.Type, Count: &count}
		}
		out.DocMetadata = &fields
	}
	return out
}

// Search settings, wire → domain.

// domainRetrievalModel reads the search settings of a request.
func domainRetrievalModel(rm *gen.RetrievalModel) (datasets.RetrievalModel, error) {
	out := datasets.RetrievalModel{SearchMethod: string(rm.SearchMethod), RerankingEnable: rm.RerankingEnable,
		RerankingMode: (*string)(rm.RerankingMode), TopK: rm.TopK, ScoreThresholdEnabled: rm.ScoreThresholdEnabled,
		ScoreThreshold: rm.ScoreThreshold}
	if m := rm.RerankingModel; m != nil {
		out.RerankingModel = &datasets.RerankingModel{ProviderName: valueOf(m.RerankingProviderName), ModelName: valueOf(m.RerankingModelName)}
	}
	if w := rm.Weights; w != nil {
		out.Weights = &datasets.Weights{WeightType: (*string)(w.WeightType)}
		if v := w.VectorSetting; v != nil {
			out.Weights.VectorSetting = &datasets.VectorSetting{VectorWeight: v.VectorWeight,
				EmbeddingProviderName: v.EmbeddingProviderName, EmbeddingModelName: v.EmbeddingModelName}
		}
		if k := w.KeywordSetting; k != nil {
			out.Weights.KeywordSetting = &datasets.KeywordSetting{KeywordWeight: k.KeywordWeight}
		}
	}
	if f := rm.MetadataFilteringConditions; f != nil {
		mf := &datasets.MetadataFilter{LogicalOperator: (*string)(f.LogicalOperator)}
		if f.Conditions != nil {
			mf.Conditions = make([]datasets.MetadataCondition, len(*f.Conditions))
			for i, c := range *f.Conditions {
				mf.Conditions[i] = datasets.MetadataCondition{Name: c.Name, ComparisonOperator: string(c.ComparisonOperator)}
				if c.Value != nil {
					// The value is a union (string, number or strings): read
					// as the domain's untyped value, as a JSON decode gives.
					raw, err := c.Value.MarshalJSON()
					if err != nil {
						return out, err
					}
					if err := json.Unmarshal(raw, &mf.Conditions[i].Value); err != nil {
						return out, err
					}
				}
			}
		}
		out.MetadataFilteringConditions = mf
	}
	return out, nil
}

// domainSummaryIndexSetting reads the summary settings of a new knowledge
// base.
func domainSummaryIndexSetting(enable *bool, model, provider, prompt *string) datasets.SummaryIndexSetting {
	return datasets.SummaryIndexSetting{Enable: enable, ModelName: model, ModelProviderName: provider, SummaryPrompt: prompt}
}
