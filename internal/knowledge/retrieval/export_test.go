package retrieval

import (
	"context"
	"fmt"
	"time"

	appdb "appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/models"
)

// FullTextRanks ranks the chunks of the knowledge bases for query as a
// full-text search does (got) and with the query that joins every match
// (want), with at most limit of them; twoStep reports whether the ranking
// by the index first answered on its own.
func FullTextRanks(s *Service, datasetIDs []string, query string, filter *datasets.MetadataFilter, limit int) (got, want []string, twoStep bool, err error) {
	ctx := context.Background()
	var rows []models.Dataset
	if err := s.db.Where("id IN ?", datasetIDs).Find(&rows).Error; err != nil {
		return nil, nil, false, err
	}
	docs, err := s.allowedDocuments(ctx, rows, filter)
	if err != nil {
		return nil, nil, false, err
	}
	f := fullTextSQL(s.db, query)
	ids := func(rs []ftsRow) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	g, err := s.fullTextSegments(ctx, f, datasetIDs, docs, limit)
	if err != nil {
		return nil, nil, false, err
	}
	w, err := s.joinedSegments(ctx, f, datasetIDs, docs, limit)
	if err != nil {
		return nil, nil, false, err
	}
	if !appdb.IsPostgres(s.db) {
		_, twoStep, err = s.rankedFirst(ctx, f, datasetIDs, docs, limit)
	}
	return ids(g), ids(w), twoStep, err
}

// TextCand is a full-text candidate: a chunk, or a child chunk of it,
// with its score.
type TextCand struct {
	Segment, Child string
	Score          float64
}

func textCands(cs []cand) []TextCand {
	out := []TextCand{}
	for _, c := range cs {
		out = append(out, TextCand{Segment: c.segment, Child: c.child, Score: c.score})
	}
	return out
}

func searchDocs(s *Service, datasetIDs []string, filter *datasets.MetadataFilter) (*docSet, error) {
	var rows []models.Dataset
	if err := s.db.Where("id IN ?", datasetIDs).Find(&rows).Error; err != nil {
		return nil, err
	}
	return s.allowedDocuments(context.Background(), rows, filter)
}

// FullTextIndexed ranks through the ranking index alone; indexed is false
// when the index is missing or out of date and the SQL path would answer.
func FullTextIndexed(s *Service, datasetIDs []string, query string, filter *datasets.MetadataFilter, limit int) (got []TextCand, indexed bool, err error) {
	docs, err := searchDocs(s, datasetIDs, filter)
	if err != nil {
		return nil, false, err
	}
	cs, ok, err := s.indexedFullText(context.Background(), datasetIDs, query, docs, limit, 0)
	return textCands(cs), ok, err
}

// FullTextSQL ranks through the SQL path alone.
func FullTextSQL(s *Service, datasetIDs []string, query string, filter *datasets.MetadataFilter, limit int) ([]TextCand, error) {
	docs, err := searchDocs(s, datasetIDs, filter)
	if err != nil {
		return nil, err
	}
	cs, err := s.sqlFullText(context.Background(), datasetIDs, query, docs, limit)
	return textCands(cs), err
}

// FullTextCandidates ranks as a full-text search does: through the index
// when it is current, through SQL otherwise.
func FullTextCandidates(s *Service, datasetIDs []string, query string, limit int) ([]TextCand, error) {
	docs, err := searchDocs(s, datasetIDs, nil)
	if err != nil {
		return nil, err
	}
	cs, err := s.fullTextCandidates(context.Background(), datasetIDs, query, docs, limit)
	return textCands(cs), err
}

// WaitTextIndex waits until the ranking index of a knowledge base is
// current, starting its read as searches do.
func WaitTextIndex(s *Service, datasetID string) error {
	ctx := context.Background()
	for range 2000 {
		v, err := textVersions(ctx, s.db, []string{datasetID})
		if err != nil {
			return err
		}
		if s.text.current(datasetID, v[datasetID]) != nil {
			return nil
		}
		s.text.refresh(s.db, datasetID)
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("the full-text index of %s did not become current", datasetID)
}

// TextTokens is the tokens of text as the ranking index reads them.
func TextTokens(text string) []string {
	var out []string
	textTokens(text, func(t string) { out = append(out, t) })
	return out
}

// SetBuiltinRerankWeight sets the builtin reranker's part of blended
// scores for a test and restores it after.
func SetBuiltinRerankWeight(t interface{ Cleanup(func()) }, w float64) {
	old := builtinRerankWeight
	builtinRerankWeight = w
	t.Cleanup(func() { builtinRerankWeight = old })
}
