package datasets

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"appkb/internal/platform/apperr"
	"appkb/models"
)

// Search methods of a retrieval model.
const (
	SearchKeyword  = "keyword_search"
	SearchSemantic = "semantic_search"
	SearchFullText = "full_text_search"
	SearchHybrid   = "hybrid_search"
)

// Reranking modes of a retrieval model.
const (
	ModeRerankingModel = "reranking_model"
	ModeWeightedScore  = "weighted_score"
)

// DefaultTopK is how many chunks a search returns when the knowledge base
// was given no retrieval model.
const DefaultTopK = 3

// RetrievalModel is how a knowledge base is searched. It is stored as JSON in
// datasets.retrieval_model and returned as retrieval_model_dict; the JSON
// names are the API's.
type RetrievalModel struct {
	SearchMethod          string          `json:"search_method"`
	RerankingEnable       bool            `json:"reranking_enable"`
	RerankingMode         *string         `json:"reranking_mode"`
	RerankingModel        *RerankingModel `json:"reranking_model"`
	TopK                  int             `json:"top_k"`
	ScoreThresholdEnabled bool            `json:"score_threshold_enabled"`
	ScoreThreshold        *float64        `json:"score_threshold"`
	Weights               *Weights        `json:"weights"`
	// MetadataFilteringConditions restricts searches to documents whose
	// metadata match; nil means no restriction.
	MetadataFilteringConditions *MetadataFilter `json:"metadata_filtering_conditions,omitempty"`
}

// RerankingModel names the model that reorders search results.
type RerankingModel struct {
	ProviderName string `json:"reranking_provider_name"`
	ModelName    string `json:"reranking_model_name"`
}

// Weights balances the semantic and keyword halves of a hybrid search.
type Weights struct {
	WeightType     *string         `json:"weight_type,omitempty"`
	VectorSetting  *VectorSetting  `json:"vector_setting,omitempty"`
	KeywordSetting *KeywordSetting `json:"keyword_setting,omitempty"`
}

// VectorSetting is the semantic half of Weights.
type VectorSetting struct {
	VectorWeight          *float64 `json:"vector_weight,omitempty"`
	EmbeddingProviderName *string  `json:"embedding_provider_name,omitempty"`
	EmbeddingModelName    *string  `json:"embedding_model_name,omitempty"`
}

// KeywordSetting is the keyword half of Weights.
type KeywordSetting struct {
	KeywordWeight *float64 `json:"keyword_weight,omitempty"`
}

// MetadataFilter is a set of conditions on document metadata, joined by
// LogicalOperator ("and" unless "or").
type MetadataFilter struct {
	LogicalOperator *string             `json:"logical_operator,omitempty"`
	Conditions      []MetadataCondition `json:"conditions,omitempty"`
}

// MetadataCondition compares one metadata field with Value, which is a
// string, a number, a list of strings or nil depending on the operator.
type MetadataCondition struct {
	Name               string `json:"name"`
	ComparisonOperator string `json:"comparison_operator"`
	Value              any    `json:"value,omitempty"`
}

// DefaultRetrievalModel is what a knowledge base without stored search
// settings uses: semantic search (keyword search for economy knowledge
// bases, which have no embeddings), no reranking, the DefaultTopK best
// chunks and no score threshold.
func DefaultRetrievalModel(indexingTechnique *string) RetrievalModel {
	method := SearchSemantic
	if indexingTechnique != nil && *indexingTechnique == TechniqueEconomy {
		method = SearchKeyword
	}
	return RetrievalModel{
		SearchMethod:   method,
		RerankingModel: &RerankingModel{},
		TopK:           DefaultTopK,
	}
}

// EffectiveRetrievalModel returns the search settings of a knowledge base:
// the stored ones, or the defaults when none were given.
func EffectiveRetrievalModel(row *models.Dataset) (RetrievalModel, error) {
	if row.RetrievalModel == nil || *row.RetrievalModel == "" {
		return DefaultRetrievalModel(row.IndexingTechnique), nil
	}
	var rm RetrievalModel
	if err := json.Unmarshal([]byte(*row.RetrievalModel), &rm); err != nil {
		return rm, fmt.Errorf("knowledge base %s: stored retrieval model: %w", row.ID, err)
	}
	if rm.RerankingModel == nil {
		rm.RerankingModel = &RerankingModel{}
	}
	return rm, nil
}

var (
	searchMethods  = []string{SearchKeyword, SearchSemantic, SearchFullText, SearchHybrid}
	rerankingModes = []string{ModeRerankingModel, ModeWeightedScore}
	weightTypes    = []string{"semantic_first", "keyword_first", "customized"}
	logicalOps     = []string{"and", "or"}
	comparisonOps  = []string{"contains", "not contains", "start with", "end with", "is", "is not", "empty",
		"not empty", "in", "not in", "=", "≠", ">", "<", "≥", "≤", "before", "after"}
)

// checkRetrievalModel validates search settings before they are stored and
// returns them ready to store. A reranking model is checked only when
// reranking is on and one is named.
func (s *Store) checkRetrievalModel(rm RetrievalModel) (RetrievalModel, error) {
	if !slices.Contains(searchMethods, rm.SearchMethod) {
		return rm, apperr.InvalidParam("retrieval_model.search_method must be one of %s.", strings.Join(searchMethods, ", "))
	}
	if rm.TopK < 1 {
		return rm, apperr.InvalidParam("retrieval_model.top_k must be at least 1.")
	}
	if rm.ScoreThreshold != nil && (*rm.ScoreThreshold < 0 || *rm.ScoreThreshold > 1) {
		return rm, apperr.InvalidParam("retrieval_model.score_threshold must be between 0 and 1.")
	}
	if rm.RerankingMode != nil && !slices.Contains(rerankingModes, *rm.RerankingMode) {
		return rm, apperr.InvalidParam("retrieval_model.reranking_mode must be one of %s.", strings.Join(rerankingModes, ", "))
	}
	if w := rm.Weights; w != nil && w.WeightType != nil && !slices.Contains(weightTypes, *w.WeightType) {
		return rm, apperr.InvalidParam("retrieval_model.weights.weight_type must be one of %s.", strings.Join(weightTypes, ", "))
	}
	if f := rm.MetadataFilteringConditions; f != nil {
		if f.LogicalOperator != nil && !slices.Contains(logicalOps, *f.LogicalOperator) {
			return rm, apperr.InvalidParam("retrieval_model.metadata_filtering_conditions.logical_operator must be and or or.")
		}
		for i, c := range f.Conditions {
			if !slices.Contains(comparisonOps, c.ComparisonOperator) {
				return rm, apperr.InvalidParam("retrieval_model.metadata_filtering_conditions.conditions[%d].comparison_operator %q is not known.", i, c.ComparisonOperator)
			}
		}
	}
	if rm.RerankingModel == nil {
		rm.RerankingModel = &RerankingModel{}
	}
	if rm.RerankingEnable && rm.RerankingModel.ModelName != "" {
		if _, err := s.models.Rerank(rm.RerankingModel.ProviderName, rm.RerankingModel.ModelName); err != nil {
			return rm, apperr.InvalidParam("The reranking model %q of provider %q cannot be used: %s",
				clip(rm.RerankingModel.ModelName), clip(rm.RerankingModel.ProviderName), apperr.From(err).Message)
		}
	}
	return rm, nil
}
