package retrieval

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	appdb "appkb/db"
	"appkb/internal/knowledge/textsplit"
)

// Full-text search differs by engine. SQLite ranks with FTS5's bm25() over
// the segments_fts and child_chunks_fts tables; PostgreSQL keeps a stemmed
// tsvector column on the chunk tables (GIN-indexed) and ranks with
// ts_rank_cd. Both become a positive strength that fullTextScore maps into
// [0, 1), so thresholds and hybrid weights behave alike on either.

// ftsTerms splits free text into at most 64 distinct lower-case terms of
// letters and digits; no operator of either engine's query syntax can get
// through. Chinese and Japanese are cut into words as the ranking index
// cuts chunks (textsplit.CJKWords).
func ftsTerms(text string) []string {
	var terms []string
	seen := map[string]bool{}
	add := func(f string) {
		if !seen[f] && len(terms) < 64 {
			seen[f] = true
			terms = append(terms, f)
		}
	}
	for _, f := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !isTokenRune(r) }) {
		if !hasCJK(f) {
			add(f)
			continue
		}
		// Split at the edges of the CJK runs, then cut those into words.
		var word, cjk []rune
		flush := func() {
			if len(word) > 0 {
				add(string(word))
				word = word[:0]
			}
			if len(cjk) > 0 {
				textsplit.CJKWords(string(cjk), add)
				cjk = cjk[:0]
			}
		}
		for _, r := range f {
			if r >= 0x2E80 && textsplit.IsCJK(r) {
				if len(word) > 0 {
					flush()
				}
				cjk = append(cjk, r)
			} else {
				if len(cjk) > 0 {
					flush()
				}
				word = append(word, r)
			}
		}
		flush()
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
// by full-text relevance: at most limit chunks and limit child chunks. The
// ranking index of the knowledge bases answers when it is current (see
// textindex.go), the SQL path otherwise.
func (s *Service) fullTextCandidates(ctx context.Context, datasets []string, query string, docs *docSet, limit int) ([]cand, error) {
	wait := textWait
	if hasCJK(query) {
		// The SQL path's tokenizers keep a run of Chinese or Japanese as
		// one token and so find next to nothing: wait for the index.
		wait = cjkTextWait
	}
	if out, ok, err := s.indexedFullText(ctx, datasets, query, docs, limit, wait); err != nil || ok {
		return out, err
	}
	return s.sqlFullText(ctx, datasets, query, docs, limit)
}

// cjkTextWait is textWait for queries in Chinese or Japanese.
const cjkTextWait = 10 * time.Second

// sqlFullText is fullTextCandidates through the SQL path, when the ranking
// index cannot answer.
func (s *Service) sqlFullText(ctx context.Context, datasets []string, query string, docs *docSet, limit int) ([]cand, error) {
	f := fullTextSQL(s.db, query)
	if f.match == "" {
		return nil, nil
	}
	// The child chunks' query runs beside the chunks' query.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	childc := goCandidates(func() ([]cand, error) {
		if !docs.anyHierarchical() {
			return nil, nil // no document whose child chunks may match
		}
		return s.fullTextChildren(ctx, f, datasets, docs, limit)
	})
	segRows, err := s.fullTextSegments(ctx, f, datasets, docs, limit)
	if err != nil {
		return nil, err
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

// ftsRow is a chunk ranked by full-text relevance.
type ftsRow struct {
	ID       string
	Strength float64
}

// fullTextSegments ranks the chunks of documents other than parent-child
// ones by full-text relevance: the best limit of those that may be
// returned, strongest first (ties by seq).
//
// On SQLite the index alone ranks the matches first (rankedFirst); joining
// every match with its chunk and document rows reads those rows for each
// of what can be thousands of matches, most of them from outside the
// connection's small page cache (which every write, such as a search
// counting its hits, empties), a system call each. When that finds too few chunks that may be returned, the
// query that joins every match runs instead.
func (s *Service) fullTextSegments(ctx context.Context, f ftsSQL, datasets []string, docs *docSet, limit int) ([]ftsRow, error) {
	// With a filter that lets through too many documents to list, the
	// joined query has no limit (see restrict), and neither has its answer.
	if !appdb.IsPostgres(s.db) && (!docs.filtered || len(docs.allowed) <= maxInList) && s.crowded.try(datasets) {
		rows, ok, err := s.rankedFirst(ctx, f, datasets, docs, limit)
		if err != nil || ok {
			return rows, err
		}
		s.crowded.missed(datasets)
	}
	return s.joinedSegments(ctx, f, datasets, docs, limit)
}

// joinedSegments is fullTextSegments in one query that joins every match
// with its chunk and document rows.
func (s *Service) joinedSegments(ctx context.Context, f ftsSQL, datasets []string, docs *docSet, limit int) ([]ftsRow, error) {
	var segRows []ftsRow
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
	return segRows, nil
}

// rankedFirst is fullTextSegments on SQLite in two steps: the best
// rankedFactor × limit matches of the whole index by strength, then the
// chunk rows of those only, keeping the chunks that may be returned in the
// same order. ok is false when fewer than limit were kept
// out of a full first step: chunks further down might then have been
// kept, and only the joined query can tell.
func (s *Service) rankedFirst(ctx context.Context, f ftsSQL, datasets []string, docs *docSet, limit int) (out []ftsRow, ok bool, err error) {
	n := limit * rankedFactor
	rows, err := s.db.WithContext(ctx).Raw(`SELECT rowid, -bm25(segments_fts) AS strength FROM segments_fts
		WHERE segments_fts MATCH ? ORDER BY strength DESC, rowid LIMIT ?`, f.match, n).Rows()
	if err != nil {
		return nil, false, fmt.Errorf("full-text search: %w", err)
	}
	type match struct {
		seq      int64
		strength float64
	}
	var matches []match
	for rows.Next() {
		var m match
		if err := rows.Scan(&m.seq, &m.strength); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("full-text search: %w", err)
		}
		matches = append(matches, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("full-text search: %w", err)
	}
	if len(matches) == 0 {
		return nil, true, nil
	}
	// Then which of the best matches may be returned, a stretch at a time
	// until limit are: the conditions of the joined query, on facts that
	// never change once a chunk is written (its id, document and knowledge
	// base, kept in memory once read), the chunks disabled now (a partial
	// index lists them) and the allowed documents read before the search
	// (the same facts the hits are checked against afterwards).
	disabled, err := s.disabledChunks(ctx, datasets)
	if err != nil {
		return nil, false, err
	}
	in := make(map[string]bool, len(datasets))
	for _, d := range datasets {
		in[d] = true
	}
	for start := 0; start < len(matches) && len(out) < limit; {
		part := matches[start:min(len(matches), start+max(limit-len(out), 16))]
		start += len(part)
		seqs := make([]int64, len(part))
		for i, m := range part {
			seqs[i] = m.seq
		}
		facts, err := s.facts.get(ctx, s.db, seqs)
		if err != nil {
			return nil, false, err
		}
		for _, m := range part {
			f, ok := facts[m.seq]
			if !ok || !in[f.dataset] || disabled[m.seq] || !docs.allowed[f.doc] || docs.hierarchical(f.doc) {
				continue
			}
			if len(out) < limit {
				out = append(out, ftsRow{ID: f.id, Strength: m.strength})
			}
		}
	}
	return out, len(out) >= limit || len(matches) < n, nil
}

// disabledChunks lists the seq of the disabled chunks of the knowledge
// bases (through the partial index segments_disabled, migration 0023).
func (s *Service) disabledChunks(ctx context.Context, datasets []string) (map[int64]bool, error) {
	var seqs []int64
	err := s.db.WithContext(ctx).Raw(`SELECT seq FROM segments INDEXED BY segments_disabled
		WHERE dataset_id IN ? AND NOT enabled`, datasets).Scan(&seqs).Error
	if err != nil {
		return nil, fmt.Errorf("full-text search: %w", err)
	}
	out := make(map[int64]bool, len(seqs))
	for _, q := range seqs {
		out[q] = true
	}
	return out, nil
}

// chunkFacts is what never changes about a chunk row once written: its
// id, document and knowledge base. A seq is never used again (the column
// is AUTOINCREMENT), so facts read once stay true for as long as the row
// exists; a deleted row's seq no longer comes out of the full-text index.
type chunkFacts struct {
	id, doc, dataset string
}

// factCache keeps the facts of chunks by seq, for one database. Safe for
// concurrent use.
type factCache struct {
	mu    sync.RWMutex
	bySeq map[int64]chunkFacts
}

// maxFacts bounds a factCache (about 200 bytes an entry with the map's
// own, so at most about 40 MB); when full it starts again empty. Only
// chunks that came out among the best matches of a search are kept.
const maxFacts = 200000

// get returns the facts of the chunks with the given seqs, reading those
// it does not hold; seqs without a row are left out.
func (c *factCache) get(ctx context.Context, gdb *gorm.DB, seqs []int64) (map[int64]chunkFacts, error) {
	out := make(map[int64]chunkFacts, len(seqs))
	var missing []byte
	c.mu.RLock()
	for _, q := range seqs {
		if f, ok := c.bySeq[q]; ok {
			out[q] = f
			continue
		}
		if len(missing) == 0 {
			missing = append(missing, '[')
		} else {
			missing = append(missing, ',')
		}
		missing = strconv.AppendInt(missing, q, 10)
	}
	c.mu.RUnlock()
	if len(missing) == 0 {
		return out, nil
	}
	missing = append(missing, ']')
	// json_each drives the join so that only these rows are read.
	rows, err := gdb.WithContext(ctx).Raw(`SELECT s.seq, s.id, s.document_id, s.dataset_id
		FROM json_each(?) AS j CROSS JOIN segments AS s ON s.seq = j.value`, string(missing)).Rows()
	if err != nil {
		return nil, fmt.Errorf("full-text search: %w", err)
	}
	defer rows.Close()
	read := map[int64]chunkFacts{}
	for rows.Next() {
		var q int64
		var f chunkFacts
		if err := rows.Scan(&q, &f.id, &f.doc, &f.dataset); err != nil {
			return nil, fmt.Errorf("full-text search: %w", err)
		}
		read[q] = f
		out[q] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("full-text search: %w", err)
	}
	c.mu.Lock()
	if c.bySeq == nil || len(c.bySeq)+len(read) > maxFacts {
		c.bySeq = make(map[int64]chunkFacts, len(read))
	}
	for q, f := range read {
		c.bySeq[q] = f
	}
	c.mu.Unlock()
	return out, nil
}

// crowdedSets remembers the sets of knowledge bases whose full-text
// searches lately found too few of their own chunks among the best matches
// of the whole index (other knowledge bases hold most of the matching
// chunks); their next searches go straight to the joined query rather than
// pay for both. Safe for concurrent use.
type crowdedSets struct {
	mu   sync.Mutex
	skip map[string]int // searches left to skip the first step, by set
}

// crowdedSkip is how many searches of a set skip the first step after it
// fell short.
const crowdedSkip = 32

func setKey(datasets []string) string {
	key := slices.Clone(datasets)
	slices.Sort(key)
	return strings.Join(key, ",")
}

// try tells whether a search of datasets should rank by the index first.
func (c *crowdedSets) try(datasets []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := setKey(datasets)
	if c.skip[key] > 0 {
		c.skip[key]--
		return false
	}
	delete(c.skip, key)
	return true
}

// missed records that ranking by the index first fell short for datasets.
func (c *crowdedSets) missed(datasets []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.skip == nil || len(c.skip) >= 1000 {
		c.skip = map[string]int{}
	}
	c.skip[setKey(datasets)] = crowdedSkip
}

// rankedFactor is how many matches per wanted chunk rankedFirst ranks
// before it reads rows: room for chunks of other knowledge bases or of
// disabled documents among the best matches.
const rankedFactor = 2

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
