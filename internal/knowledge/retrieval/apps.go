package retrieval

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"appkb/internal/apps"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/run/workflow"
	"appkb/models"
)

// DefaultAppTopK is how many chunks an app retrieves when its
// dataset_configs name no top_k (Dify's default).
const DefaultAppTopK = 4

// ForApp retrieves the knowledge of a chat or completion app: it searches
// the enabled knowledge bases of the app's dataset_configs for query and
// returns the texts to put into the prompt and the resources the answer
// cites, in the same order. Apps without knowledge bases get nothing.
//
// Each knowledge base is searched with its own stored search settings,
// with the app's top_k. In "multiple" mode the hits of all knowledge bases
// are merged by score and, when the app turns reranking on with a rerank
// model, reordered by it; the app's score threshold and top_k then apply.
// In "single" mode (where Dify lets the model pick one knowledge base) the
// knowledge base with the best hit is used alone.
//
// Metadata filtering applies in the "manual" mode; the "automatic" mode,
// which needs a model to write the conditions, is not supported and
// filters nothing.
func (s *Service) ForApp(ctx context.Context, appID string, mc *apps.ModelConfig, query string) ([]string, []models.RetrieverResource, error) {
	if mc == nil {
		return nil, nil, nil
	}
	dc := mc.DatasetConfigs
	var datasetIDs []string
	for _, d := range dc.Datasets.Datasets {
		if d.Enabled && d.ID != "" {
			datasetIDs = append(datasetIDs, d.ID)
		}
	}
	if len(datasetIDs) == 0 || strings.TrimSpace(query) == "" {
		return nil, nil, nil
	}
	topK := DefaultAppTopK
	if dc.TopK != nil && *dc.TopK > 0 {
		topK = *dc.TopK
	}
	var filter *datasets.MetadataFilter
	if dc.MetadataFilteringMode == "manual" && dc.MetadataFilteringConditions != nil {
		b, _ := json.Marshal(dc.MetadataFilteringConditions)
		var f datasets.MetadataFilter
		if json.Unmarshal(b, &f) == nil {
			filter = &f
		}
	}
	var threshold *float64
	if dc.ScoreThresholdEnabled && dc.ScoreThreshold != nil {
		threshold = dc.ScoreThreshold
	}
	var rerank *datasets.RerankingModel
	if dc.RerankingEnabled != nil && *dc.RerankingEnabled && dc.RerankingModel.ModelName != "" && dc.RerankingMode != datasets.ModeWeightedScore {
		rerank = &datasets.RerankingModel{ProviderName: dc.RerankingModel.ProviderName, ModelName: dc.RerankingModel.ModelName}
	}

	hits, err := s.searchEach(ctx, datasetIDs, query, topK, filter, threshold)
	if err != nil {
		return nil, nil, err
	}
	if dc.RetrievalModel == "single" {
		hits = bestDataset(hits)
	}
	if rerank != nil && dc.RetrievalModel != "single" {
		if hits, err = s.rerank(ctx, query, hits, rerank, stageMixed); err != nil {
			return nil, nil, err
		}
	}
	hits = applyThreshold(hits, threshold)
	if len(hits) > topK {
		hits = hits[:topK]
	}
	if err := s.countHits(ctx, hits); err != nil {
		return nil, nil, err
	}
	contexts := make([]string, len(hits))
	resources := make([]models.RetrieverResource, len(hits))
	for i, h := range hits {
		contexts[i] = hitText(h)
		resources[i] = models.RetrieverResource{
			Position: i + 1, DatasetID: h.DatasetID, DatasetName: h.DatasetName, DocumentID: h.Document.ID,
			DocumentName: h.Document.Name, DataSourceType: h.Document.DataSourceType, SegmentID: h.Segment.ID,
			Score: h.Score, HitCount: h.Segment.HitCount, WordCount: h.Segment.WordCount,
			SegmentPosition: h.Segment.Position, IndexNodeHash: h.Segment.IndexNodeHash, Content: contexts[i],
		}
	}
	return contexts, resources, nil
}

// searchEach searches each knowledge base with its own settings and merges
// the hits by score, best first.
func (s *Service) searchEach(ctx context.Context, datasetIDs []string, query string, topK int, filter *datasets.MetadataFilter, threshold *float64) ([]Hit, error) {
	var rows []models.Dataset
	if err := s.db.WithContext(ctx).Where("id IN ?", datasetIDs).Find(&rows).Error; err != nil {
		return nil, err
	}
	var all []Hit
	for i := range rows {
		rm, err := datasets.EffectiveRetrievalModel(&rows[i])
		if err != nil {
			return nil, err
		}
		rm.TopK = topK
		rm.MetadataFilteringConditions = filter
		if threshold != nil {
			rm.ScoreThresholdEnabled, rm.ScoreThreshold = true, threshold
		}
		hits, err := s.search(ctx, []string{rows[i].ID}, query, rm)
		if err != nil {
			return nil, err
		}
		all = append(all, hits...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Score > all[j].Score })
	return all, nil
}

// bestDataset keeps the hits of the knowledge base whose hit scored best.
func bestDataset(hits []Hit) []Hit {
	if len(hits) == 0 {
		return hits
	}
	best := hits[0].DatasetID
	out := hits[:0]
	for _, h := range hits {
		if h.DatasetID == best {
			out = append(out, h)
		}
	}
	return out
}

// hitText is the text a hit contributes as context: a Q&A chunk as
// question and answer, a parent-child chunk as the whole parent.
func hitText(h Hit) string {
	if h.Segment.Answer != "" {
		return "question: " + h.Segment.Content + " answer: " + h.Segment.Answer
	}
	return h.Segment.Content
}

// WorkflowRetriever serves the knowledge-retrieval node of the workflow
// engine.
type WorkflowRetriever struct{ Service *Service }

var _ workflow.Retriever = WorkflowRetriever{}

// Retrieve searches the node's knowledge bases. The node's
// multiple_retrieval_config (top_k, score_threshold, reranking) and its
// manual metadata filter apply; each result is {content, title, metadata}
// with the metadata Dify's node gives.
func (w WorkflowRetriever) Retrieve(ctx context.Context, req workflow.RetrieveRequest) ([]map[string]any, error) {
	mc := &apps.ModelConfig{}
	dc := &mc.DatasetConfigs
	dc.RetrievalModel = req.Mode
	for _, id := range req.DatasetIDs {
		dc.Datasets.Datasets = append(dc.Datasets.Datasets, apps.DatasetRef{ID: id, Enabled: true})
	}
	if m, ok := req.Config["multiple_retrieval_config"].(map[string]any); ok {
		if n, ok := toFloat(m["top_k"]); ok {
			k := int(n)
			dc.TopK = &k
		}
		if n, ok := toFloat(m["score_threshold"]); ok {
			dc.ScoreThreshold, dc.ScoreThresholdEnabled = &n, true
		}
		if on, ok := m["reranking_enable"].(bool); ok {
			dc.RerankingEnabled = &on
		}
		dc.RerankingMode, _ = m["reranking_mode"].(string)
		if rm, ok := m["reranking_model"].(map[string]any); ok {
			dc.RerankingModel.ProviderName, _ = rm["provider"].(string)
			dc.RerankingModel.ModelName, _ = rm["model"].(string)
		}
	}
	if mode, _ := req.Config["metadata_filtering_mode"].(string); mode == "manual" {
		dc.MetadataFilteringMode = mode
		dc.MetadataFilteringConditions, _ = req.Config["metadata_filtering_conditions"].(map[string]any)
	}
	_, res, err := w.Service.ForApp(ctx, req.AppID, mc, req.Query)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(res))
	for i, r := range res {
		out[i] = map[string]any{
			"content": r.Content,
			"title":   r.DocumentName,
			"metadata": map[string]any{
				"_source": "knowledge", "position": r.Position, "dataset_id": r.DatasetID, "dataset_name": r.DatasetName,
				"document_id": r.DocumentID, "document_name": r.DocumentName, "data_source_type": r.DataSourceType,
				"segment_id": r.SegmentID, "retriever_from": "workflow", "score": r.Score, "segment_hit_count": r.HitCount,
				"segment_word_count": r.WordCount, "segment_position": r.SegmentPosition, "segment_index_node_hash": r.IndexNodeHash,
			},
		}
	}
	return out, nil
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}
