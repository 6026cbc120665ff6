package retrieval

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"gorm.io/gorm"

	appdb "appkb/db"
)

// Full-text search differs by engine. SQLite ranks with FTS5's bm25() over
// the segments_fts and child_chunks_fts tables; PostgreSQL keeps a stemmed
// tsvector column on the chunk tables (GIN-indexed) and ranks with
// ts_rank_cd. Both become a positive strength that fullTextScore maps into
// [0, 1), so thresholds and hybrid weights behave alike on either.

// ftsTerms splits free text into at most 64 distinct lower-case terms of
// letters and digits; no operator of either engine's query syntax can get
// through.
func ftsTerms(text string) []string {
	var terms []string
	seen := map[string]bool{}
	for _, f := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r)
	}) {
		if !seen[f] && len(terms) < 64 {
			seen[f] = true
			terms = append(terms, f)
		}
	}
	return terms
}

// ftsQuery turns free text into an FTS5 query of quoted terms joined by
// OR; it is empty when the text has no letters or digits.
func ftsQuery(text string) string {
	terms := ftsTerms(text)
	for i, t := range terms {
		terms[i] = `"` + t + `"`
	}
	return strings.Join(terms, " OR ")
}

// tsQuery is the same query for PostgreSQL's to_tsquery: terms joined by |.
func tsQuery(text string) string { return strings.Join(ftsTerms(text), " | ") }

// ftsSQL holds the pieces of the two full-text queries for one engine.
type ftsSQL struct {
	segFrom, segStrength, segMatch       string
	childFrom, childStrength, childMatch string
	match                                string
	joinSeg, joinChild                   string
}

// selectArgs are the arguments of the strength expressions.
func (f ftsSQL) selectArgs() []any {
	if strings.Contains(f.segStrength, "?") {
		return []any{f.match}
	}
	return nil
}

func fullTextSQL(gdb *gorm.DB, query string) ftsSQL {
	if appdb.IsPostgres(gdb) {
		// ts_rank_cd gives about 0.1 per matched term where BM25 gives
		// about 1, so it is scaled by ten to land on a like scale.
		return ftsSQL{
			segFrom: "segments AS s", segStrength: "10 * ts_rank_cd(s.tsv, to_tsquery('english', ?))",
			segMatch:  "s.tsv @@ to_tsquery('english', ?)",
			childFrom: "child_chunks AS c", childStrength: "10 * ts_rank_cd(c.tsv, to_tsquery('english', ?))",
			childMatch: "c.tsv @@ to_tsquery('english', ?)",
			match:      tsQuery(query),
		}
	}
	return ftsSQL{
		segFrom: "segments_fts AS f", segStrength: "-bm25(segments_fts)", segMatch: "segments_fts MATCH ?",
		joinSeg:   "JOIN segments AS s ON s.seq = f.rowid",
		childFrom: "child_chunks_fts AS f", childStrength: "-bm25(child_chunks_fts)", childMatch: "child_chunks_fts MATCH ?",
		joinChild: "JOIN child_chunks AS c ON c.seq = f.rowid",
		match:     ftsQuery(query),
	}
}

// fullTextCandidates ranks chunks (child chunks in parent-child documents)
// by full-text relevance.
func (s *Service) fullTextCandidates(ctx context.Context, datasets []string, query string, docs *docSet, pool int) ([]cand, error) {
	f := fullTextSQL(s.db, query)
	if f.match == "" {
		return nil, nil
	}
	limit := pool*10 + 100
	// The child chunks' query runs beside the chunks' query.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	childc := goCandidates(func() ([]cand, error) {
		return s.fullTextChildren(ctx, f, datasets, docs, limit)
	})
	var segRows []struct {
		ID       string
		Strength float64
	}
	q := s.db.WithContext(ctx).Table(f.segFrom).
		Select("s.id AS id, "+f.segStrength+" AS strength", f.selectArgs()...)
	if f.joinSeg != "" {
		q = q.Joins(f.joinSeg)
	}
	q = q.Joins("JOIN documents AS d ON d.id = s.document_id").
		Where(f.segMatch, f.match).
		Where("s.dataset_id IN ? AND s.enabled", datasets).
		Where("d.enabled AND NOT d.archived AND d.indexing_status = 'completed' AND d.doc_form <> ?", formHierarchical).
		Order("strength DESC, s.seq")
	if err := docs.restrict(q, "s.document_id", limit).Scan(&segRows).Error; err != nil {
		return nil, fmt.Errorf("full-text search: %w", err)
	}
	children := <-childc
	if children.err != nil {
		return nil, children.err
	}
	out := make([]cand, 0, len(segRows)+len(children.cands))
	for _, r := range segRows {
		out = append(out, cand{segment: r.ID, score: fullTextScore(r.Strength)})
	}
	return append(out, children.cands...), nil
}

// fullTextChildren ranks the child chunks of parent-child documents by
// full-text relevance.
func (s *Service) fullTextChildren(ctx context.Context, f ftsSQL, datasets []string, docs *docSet, limit int) ([]cand, error) {
	var childRows []struct {
		ID, SegmentID string
		Strength      float64
	}
	q := s.db.WithContext(ctx).Table(f.childFrom).
		Select("c.id AS id, c.segment_id AS segment_id, "+f.childStrength+" AS strength", f.selectArgs()...)
	if f.joinChild != "" {
		q = q.Joins(f.joinChild)
	}
	q = q.Joins("JOIN documents AS d ON d.id = c.document_id").
		Where(f.childMatch, f.match).
		Where("c.dataset_id IN ?", datasets).
		Where("d.enabled AND NOT d.archived AND d.indexing_status = 'completed' AND d.doc_form = ?", formHierarchical).
		Order("strength DESC, c.seq")
	if err := docs.restrict(q, "c.document_id", limit).Scan(&childRows).Error; err != nil {
		return nil, fmt.Errorf("full-text search: %w", err)
	}
	out := make([]cand, 0, len(childRows))
	for _, r := range childRows {
		out = append(out, cand{segment: r.SegmentID, child: r.ID, score: fullTextScore(r.Strength)})
	}
	return out, nil
}

// fullTextScore maps a match strength (minus FTS5's bm25(), or the scaled
// ts_rank_cd) into [0, 1).
func fullTextScore(strength float64) float64 {
	if strength <= 0 {
		return 0
	}
	return strength / (strength + 1)
}

// keywordsJoin expands a chunk's stored keyword list (a JSON array) into
// rows j(value) on gdb's engine.
func keywordsJoin(gdb *gorm.DB) string {
	if appdb.IsPostgres(gdb) {
		return "CROSS JOIN LATERAL jsonb_array_elements_text(s.keywords::jsonb) AS j(value)"
	}
	return "JOIN json_each(s.keywords) AS j"
}
