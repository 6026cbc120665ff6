package handlers

import (
	"appkb/internal/knowledge/documents"
	"context"
	"strings"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/platform/apperr"
)

// retrieveRecord is one hit as POST /datasets/{id}/retrieve returns it.
type retrieveRecord struct {
	Segment      retrievedSegment `json:"segment"`
	ChildChunks  []retrievedChild `json:"child_chunks"`
	Score        float64          `json:"score"`
	TsnePosition map[string]any   `json:"tsne_position"`
	Files        []any            `json:"files"`
	Summary      *string          `json:"summary"`
}

// retrievedSegment is a chunk as the chunk operations show it, plus a
// summary of its document.
type retrievedSegment struct {
	documents.Segment
	Document retrievedDocInfo `json:"document"`
}

type retrievedDocInfo struct {
	ID             string         `json:"id"`
	DataSourceType string         `json:"data_source_type"`
	Name           string         `json:"name"`
	DocType        *string        `json:"doc_type"`
	DocMetadata    map[string]any `json:"doc_metadata"`
}

type retrievedChild struct {
	ID       string  `json:"id"`
	Content  string  `json:"content"`
	Position int     `json:"position"`
	Score    float64 `json:"score"`
}

// retrieveJSON is the query and its records, before they are checked
// into the generated answer type.
type retrieveJSON struct {
	Query struct {
		Content string `json:"content"`
	} `json:"query"`
	Records []retrieveRecord `json:"records"`
}

// retrieve runs a search of one knowledge base and shapes the answer.
func (s *Server) retrieve(ctx context.Context, datasetID, query string, rm datasets.RetrievalModel) (retrieveJSON, error) {
	var out retrieveJSON
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
	out.Records = make([]retrieveRecord, 0, len(hits))
	for _, h := range hits {
		seg := h.Segment
		rec := retrieveRecord{Score: h.Score, Files: []any{}, Segment: retrievedSegment{
			Segment: documents.SegmentView(&seg),
			Document: retrievedDocInfo{ID: h.Document.ID, DataSourceType: h.Document.DataSourceType, Name: h.Document.Name,
				DocMetadata: h.Document.Metadata},
		}}
		// Dify lists no child chunks as an empty list, never null.
		rec.ChildChunks = make([]retrievedChild, len(h.ChildChunks))
		for i, c := range h.ChildChunks {
			rec.ChildChunks[i] = retrievedChild{ID: c.ID, Content: c.Content, Position: c.Position, Score: c.Score}
		}
		out.Records = append(out.Records, rec)
	}
	return out, nil
}
