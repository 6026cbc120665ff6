package handlers

import (
	"context"
	"strings"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/platform/apperr"
)

// retrieve runs a search of one knowledge base and shapes the answer.
func (s *Server) retrieve(ctx context.Context, datasetID, query string, rm datasets.RetrievalModel) (gen.RetrieveResult, error) {
	var out gen.RetrieveResult
	out.Query.Content = query
	if strings.TrimSpace(query) == "" {
		return out, apperr.InvalidParam("query is required.")
	}
	if rm.TopK < 0 {
		return out, apperr.InvalidParam("retrieval_model.top_k must be at least 1.")
	}
	if rm.ScoreThreshold != nil && (*rm.ScoreThreshold < 0 || *rm.ScoreThreshold > 1) {
		return out, apperr.InvalidParam("retrieval_model.score_threshold must be between 0 and 1.")
	}
	hits, err := s.search.Search(ctx, []string{datasetID}, query, rm)
	if err != nil {
		return out, err
	}
	out.Records = make([]gen.RetrieveRecord, len(hits))
	for i, h := range hits {
		out.Records[i] = wire.Hit(h)
	}
	return out, nil
}
