package retrieval

import (
	"context"

	appdb "appkb/db"
	"appkb/knowledge"
	"appkb/models"
)

// FullTextRanks ranks the chunks of the knowledge bases for query as a
// full-text search does (got) and with the query that joins every match
// (want), with at most limit of them; twoStep reports whether the ranking
// by the index first answered on its own.
func FullTextRanks(s *Service, datasets []string, query string, filter *knowledge.MetadataFilter, limit int) (got, want []string, twoStep bool, err error) {
	ctx := context.Background()
	var rows []models.Dataset
	if err := s.db.Where("id IN ?", datasets).Find(&rows).Error; err != nil {
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
	g, err := s.fullTextSegments(ctx, f, datasets, docs, limit)
	if err != nil {
		return nil, nil, false, err
	}
	w, err := s.joinedSegments(ctx, f, datasets, docs, limit)
	if err != nil {
		return nil, nil, false, err
	}
	if !appdb.IsPostgres(s.db) {
		_, twoStep, err = s.rankedFirst(ctx, f, datasets, docs, limit)
	}
	return ids(g), ids(w), twoStep, err
}
