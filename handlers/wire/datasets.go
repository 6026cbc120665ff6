package wire

import (
	"encoding/json"

	"appkb/gen"
	"appkb/internal/knowledge/datasets"
)

// Tags and metadata fields of knowledge bases, domain → wire.

func Tag(t *datasets.Tag) gen.KnowledgeTag {
	return gen.KnowledgeTag{Id: t.ID, Name: t.Name, Type: &t.Type, BindingCount: &t.BindingCount}
}

// Tags lists tags; no tags is an empty list.
func Tags(list []datasets.Tag) []gen.KnowledgeTag {
	out := make([]gen.KnowledgeTag, len(list))
	for i := range list {
		out[i] = Tag(&list[i])
	}
	return out
}

// TagRefs lists the tags of a knowledge base; none is an empty list.
func TagRefs(list []datasets.TagRef) []gen.DatasetTagRef {
	out := make([]gen.DatasetTagRef, len(list))
	for i, t := range list {
		out[i] = gen.DatasetTagRef{Id: t.ID, Name: t.Name}
	}
	return out
}

func MetadataList(l *datasets.MetadataList) gen.MetadataFieldList {
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

// DomainRetrievalModel reads the search settings of a request.
func DomainRetrievalModel(rm *gen.RetrievalModel) (datasets.RetrievalModel, error) {
	out := datasets.RetrievalModel{SearchMethod: string(rm.SearchMethod), RerankingEnable: rm.RerankingEnable,
		RerankingMode: (*string)(rm.RerankingMode), TopK: rm.TopK, ScoreThresholdEnabled: rm.ScoreThresholdEnabled,
		ScoreThreshold: rm.ScoreThreshold}
	if m := rm.RerankingModel; m != nil {
		out.RerankingModel = &datasets.RerankingModel{ProviderName: ValueOf(m.RerankingProviderName), ModelName: ValueOf(m.RerankingModelName)}
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

// DomainRetrievalModelOrNil is DomainRetrievalModel for settings a request
// may leave out: none read as nil.
func DomainRetrievalModelOrNil(rm *gen.RetrievalModel) (*datasets.RetrievalModel, error) {
	if rm == nil {
		return nil, nil
	}
	out, err := DomainRetrievalModel(rm)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DomainSummaryIndexSetting reads the summary settings of a new knowledge
// base.
func DomainSummaryIndexSetting(enable *bool, model, provider, prompt *string) datasets.SummaryIndexSetting {
	return datasets.SummaryIndexSetting{Enable: enable, ModelName: model, ModelProviderName: provider, SummaryPrompt: prompt}
}

// Knowledge bases, domain → wire. Each key shows what the domain's JSON
// showed: strings and flags the domain always has are set, nil lists null.

// allocLike is a new zero value of the type p points to, for the wire's
// unnamed nested types. The objects the domain only ever sends empty ({})
// are such zero values: each of their keys null, false or 0.
func allocLike[T any](_ *T) *T { return new(T) }

func Dataset(d *datasets.Dataset) gen.Dataset {
	out := gen.Dataset{
		Id: d.ID, Name: d.Name, Description: &d.Description, Provider: d.Provider, Permission: d.Permission,
		DataSourceType: d.DataSourceType, IndexingTechnique: d.IndexingTechnique, AppCount: d.AppCount,
		DocumentCount: d.DocumentCount, WordCount: d.WordCount, CreatedBy: &d.CreatedBy, AuthorName: d.AuthorName,
		CreatedAt: float64(d.CreatedAt), UpdatedBy: &d.UpdatedBy, UpdatedAt: unixF(&d.UpdatedAt),
		EmbeddingModel: &d.EmbeddingModel, EmbeddingModelProvider: &d.EmbeddingModelProvider,
		EmbeddingAvailable: &d.EmbeddingAvailable, RetrievalModelDict: retrievalModelOf(d.RetrievalModelDict),
		DocForm: d.DocForm, BuiltInFieldEnabled: d.BuiltInFieldEnabled, PipelineId: d.PipelineID,
		RuntimeMode: d.RuntimeMode, ChunkStructure: d.ChunkStructure, IsPublished: d.IsPublished,
		TotalDocuments: d.TotalDocuments, TotalAvailableDocuments: d.TotalAvailableDocuments,
		EnableApi: d.EnableAPI, IsMultimodal: d.IsMultimodal, Maintainer: d.Maintainer,
	}
	if si := d.SummaryIndexSetting; si != nil {
		out.SummaryIndexSetting = allocLike(out.SummaryIndexSetting)
		*out.SummaryIndexSetting = struct {
			Enable            *bool   `json:"enable,omitempty"`
			ModelName         *string `json:"model_name,omitempty"`
			ModelProviderName *string `json:"model_provider_name,omitempty"`
			SummaryPrompt     *string `json:"summary_prompt,omitempty"`
		}{si.Enable, si.ModelName, si.ModelProviderName, si.SummaryPrompt}
	}
	out.Tags = namedOf(d.Tags)
	out.DocMetadata = namedOf(d.DocMetadata)
	if d.ExternalKnowledgeInfo != nil {
		out.ExternalKnowledgeInfo = allocLike(out.ExternalKnowledgeInfo)
	}
	if d.ExternalRetrievalModel != nil {
		out.ExternalRetrievalModel = allocLike(out.ExternalRetrievalModel)
	}
	if d.IconInfo != nil {
		out.IconInfo = allocLike(out.IconInfo)
	}
	// A list that is null on the wire is left out, like no list.
	if p := d.PartialMemberList; p != nil && *p != nil {
		out.PartialMemberList = p
	}
	return out
}

// namedOf lists the tags or metadata fields of a knowledge base; a nil
// list is null.
func namedOf[T datasets.DatasetTag | datasets.MetadataField](list []T) *[]struct {
	Id   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
} {
	if list == nil {
		return nil
	}
	out := make([]struct {
		Id   string `json:"id"`
		Name string `json:"name"`
		Type string `json:"type"`
	}, len(list))
	for i, v := range list {
		t := datasets.DatasetTag(v)
		out[i].Id, out[i].Name, out[i].Type = t.ID, t.Name, t.Type
	}
	return &out
}

func DatasetPage(p *datasets.Page) gen.DatasetList {
	return gen.DatasetList{Data: eachOf(p.Data, Dataset), HasMore: p.HasMore, Limit: p.Limit, Total: p.Total, Page: p.Page}
}

// retrievalModelOf is the search settings of a knowledge base as the
// answer shows them. An unset score threshold is left out, not null.
func retrievalModelOf(rm datasets.RetrievalModel) *gen.RetrievalModel {
	out := &gen.RetrievalModel{SearchMethod: gen.RetrievalModelSearchMethod(rm.SearchMethod),
		RerankingEnable: rm.RerankingEnable, RerankingMode: (*gen.RetrievalModelRerankingMode)(rm.RerankingMode),
		TopK: rm.TopK, ScoreThresholdEnabled: rm.ScoreThresholdEnabled, ScoreThreshold: rm.ScoreThreshold}
	if m := rm.RerankingModel; m != nil {
		out.RerankingModel = allocLike(out.RerankingModel)
		out.RerankingModel.RerankingProviderName, out.RerankingModel.RerankingModelName = &m.ProviderName, &m.ModelName
	}
	if w := rm.Weights; w != nil {
		out.Weights = allocLike(out.Weights)
		out.Weights.WeightType = (*gen.RetrievalModelWeightsWeightType)(w.WeightType)
		if v := w.VectorSetting; v != nil {
			out.Weights.VectorSetting = allocLike(out.Weights.VectorSetting)
			vs := out.Weights.VectorSetting
			vs.VectorWeight, vs.EmbeddingProviderName, vs.EmbeddingModelName = v.VectorWeight, v.EmbeddingProviderName, v.EmbeddingModelName
		}
		if k := w.KeywordSetting; k != nil {
			out.Weights.KeywordSetting = allocLike(out.Weights.KeywordSetting)
			out.Weights.KeywordSetting.KeywordWeight = k.KeywordWeight
		}
	}
	if f := rm.MetadataFilteringConditions; f != nil {
		out.MetadataFilteringConditions = metadataFilterOf(f)
	}
	return out
}

// metadataFilterOf is a metadata filter as the answer shows it; no
// conditions and a null value are left out.
func metadataFilterOf(f *datasets.MetadataFilter) *gen.MetadataFilteringConditions {
	out := &gen.MetadataFilteringConditions{LogicalOperator: (*gen.MetadataFilteringConditionsLogicalOperator)(f.LogicalOperator)}
	if len(f.Conditions) == 0 {
		return out
	}
	out.Conditions = allocLike(out.Conditions)
	*out.Conditions = make([]struct {
		ComparisonOperator gen.MetadataFilteringConditionsConditionsComparisonOperator `json:"comparison_operator"`
		Name               string                                                      `json:"name"`
		Value              *gen.MetadataFilteringConditions_Conditions_Value           `json:"value,omitempty"`
	}, len(f.Conditions))
	for i, c := range f.Conditions {
		w := &(*out.Conditions)[i]
		w.Name, w.ComparisonOperator = c.Name, gen.MetadataFilteringConditionsConditionsComparisonOperator(c.ComparisonOperator)
		if c.Value == nil {
			continue
		}
		// The value is a union: it holds the value's JSON text. The domain
		// read it from JSON, so encoding it cannot fail.
		raw, err := json.Marshal(c.Value)
		if err != nil || string(raw) == "null" {
			continue
		}
		w.Value = new(gen.MetadataFilteringConditions_Conditions_Value)
		_ = w.Value.UnmarshalJSON(raw)
	}
	return out
}
