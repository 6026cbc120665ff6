// Package retrieval searches the chunks of knowledge bases. It serves
// POST /datasets/{id}/retrieve, the knowledge context of chat and
// completion apps, and the knowledge-retrieval node of workflows. It knows
// nothing of HTTP.
//
// # Search methods
//
//   - keyword_search: the query's keywords (textsplit.Keywords, the same
//     function indexing uses for chunks) are matched against each chunk's
//     stored keywords; the score is the share of query keywords the chunk
//     has. Economy knowledge bases, which have no vectors, are always
//     searched this way.
//   - full_text_search: SQLite FTS5 with BM25 over chunk text (child chunk
//     text for parent-child documents). The query is reduced to quoted
//     terms joined by OR, so no FTS5 syntax from the user reaches the
//     engine. A BM25 rank r (positive after sign change) scores r/(r+1).
//     While nothing has changed since it was read, an in-memory index of
//     the knowledge base's chunk texts computes the same BM25 (on either
//     engine) without scoring every match (see textindex.go).
//   - semantic_search: the query is embedded with the knowledge base's
//     embedding model and compared by cosine with every stored vector of
//     that model, in Go. The vectors of a knowledge base are kept in memory
//     and reloaded when the stored ones change (see cache.go).
//   - hybrid_search: semantic and full-text candidates together, scored
//     either by weighted_score (vector weight times cosine plus keyword
//     weight times the BM25 strength divided by the best among the
//     candidates; without weights in the request 0.7/0.3, or 0.3/0.7 when
//     the embedding model is a builtin one, see fusion.go) or by the named
//     rerank model.
//
// Any method with reranking_enable and a named rerank model (and mode not
// weighted_score) has its candidates reordered by that model.
//
// # What is returned
//
// Only enabled, completed chunks of enabled, unarchived, completed
// documents are returned, and only documents that pass the metadata
// filter. Candidates count towards top_k one by one; for parent-child
// documents the candidates are child chunks, and child chunks of the same
// parent merge into one hit that carries them (the hit's score is the best
// child's). With score_threshold_enabled, hits below score_threshold are
// dropped. Every returned chunk's hit_count goes up by one.
package retrieval

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"gorm.io/gorm"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/llm"
	"appkb/internal/platform/cachever"
	"appkb/models"
)

// Document forms, as indexing stores them.
const formHierarchical = "hierarchical_model"

// Service runs searches. It is cheap to make: the vector cache is shared
// by every Service of the process.
type Service struct {
	db     *gorm.DB
	models *llm.Registry
	// usableDocs caches, per set of knowledge bases, the ids of their
	// documents that searches may return; any change to a document's
	// usability moves its counter (migration 0015).
	usableDocs *cachever.Cache[string, *usableSet]
	// crowded are the sets of knowledge bases whose full-text searches
	// skip ranking by the index first for a while (see fullTextSegments).
	crowded crowdedSets
	// facts are the unchanging facts of chunks full-text search has read.
	facts factCache
	// text holds the full-text ranking indexes of knowledge bases (see
	// textindex.go).
	text textCache
}

// New returns a Service over db; models resolves embedding and rerank
// models (nil means the builtin ones).
func New(db *gorm.DB, models *llm.Registry) *Service {
	return &Service{db: db, models: models, usableDocs: cachever.New[string, *usableSet](db, "documents")}
}

// Hit is one chunk found by a search.
type Hit struct {
	DatasetID   string
	DatasetName string
	// Segment is the chunk as stored; HitCount already counts this hit.
	Segment  models.Segment
	Document DocumentSummary
	Score    float64
	// ChildChunks are the matching child chunks of a parent-child chunk,
	// best first; nil for other chunks.
	ChildChunks []ChildHit
}

// DocumentSummary is what a hit tells of its document.
type DocumentSummary struct {
	ID             string
	Name           string
	DataSourceType string
	DocForm        string
	// Metadata holds the document's custom metadata values by field name.
	Metadata map[string]any
}

// ChildHit is a child chunk that matched.
type ChildHit struct {
	ID       string
	Content  string
	Position int
	Score    float64
}

// Search runs query over the given knowledge bases with the settings rm
// and counts the hits. Unknown knowledge bases are skipped; callers check
// access before.
func (s *Service) Search(ctx context.Context, datasetIDs []string, query string, rm datasets.RetrievalModel) ([]Hit, error) {
	hits, err := s.search(ctx, datasetIDs, query, rm)
	if err != nil {
		return nil, err
	}
	if err := s.countHits(ctx, hits); err != nil {
		return nil, err
	}
	return hits, nil
}

// search is Search without counting hits.
func (s *Service) search(ctx context.Context, datasetIDs []string, query string, rm datasets.RetrievalModel) ([]Hit, error) {
	query = strings.TrimSpace(query)
	if query == "" || len(datasetIDs) == 0 {
		return []Hit{}, nil
	}
	var rows []models.Dataset
	if err := s.db.WithContext(ctx).Where("id IN ?", datasetIDs).Find(&rows).Error; err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return []Hit{}, nil
	}
	docs, err := s.allowedDocuments(ctx, rows, rm.MetadataFilteringConditions)
	if err != nil {
		return nil, err
	}
	if len(docs.allowed) == 0 {
		return []Hit{}, nil
	}
	plan := planSearch(rows, rm)
	cands, err := s.candidates(ctx, &plan, query, docs, rm)
	if err != nil {
		return nil, err
	}
	hits, err := s.collectHits(ctx, &plan, cands, query, docs, rm)
	if err != nil {
		return nil, err
	}
	if plan.rerank {
		first := stageSemantic
		if len(plan.economy) > 0 || !isSemantic(rm.SearchMethod) {
			first = stageLexical
		}
		if hits, err = s.rerank(ctx, query, hits, rm.RerankingModel, first); err != nil {
			return nil, err
		}
		hits = applyThreshold(hits, plan.threshold)
		if len(hits) > plan.topK {
			hits = hits[:plan.topK]
		}
	}
	nameHits(hits, rows)
	return hits, nil
}

// searchPlan is what a search decides from its settings before it looks
// for candidates.
type searchPlan struct {
	topK int
	// pool is how many candidates the methods are asked for; limit is how
	// many hits are collected from them (more than topK when a reranker
	// picks the final ones).
	pool, limit int
	rerank      bool
	// short: plain full-text search ranks only the first shortLimit(pool)
	// candidates at first, and again in full when they fall short.
	short     bool
	threshold *float64
	// Economy knowledge bases have no vectors, so keyword search is their
	// only method whatever was asked; quality ones use the method asked.
	economy, quality []models.Dataset
}

func planSearch(rows []models.Dataset, rm datasets.RetrievalModel) searchPlan {
	p := searchPlan{topK: rm.TopK}
	if p.topK <= 0 {
		p.topK = datasets.DefaultTopK
	}
	p.rerank = rm.RerankingEnable && rm.RerankingModel != nil && rm.RerankingModel.ModelName != "" &&
		(rm.RerankingMode == nil || *rm.RerankingMode != datasets.ModeWeightedScore)
	for _, d := range rows {
		if d.IndexingTechnique != nil && *d.IndexingTechnique == datasets.TechniqueEconomy {
			p.economy = append(p.economy, d)
		} else {
			p.quality = append(p.quality, d)
		}
	}
	p.pool = p.topK * 4
	p.limit = p.topK
	if p.rerank {
		p.pool = max(p.topK*4, 20)
		p.limit = p.pool
	}
	// Ranking only the first few is enough when the best of them may be
	// returned, as they nearly always may.
	p.short = !p.rerank && len(p.economy) == 0 && rm.SearchMethod == datasets.SearchFullText
	if rm.ScoreThresholdEnabled && rm.ScoreThreshold != nil {
		p.threshold = rm.ScoreThreshold
	}
	return p
}

// candidates gathers the candidates of every knowledge base in the plan,
// keyword ones for economy knowledge bases and those of the asked method
// for the others, unsorted.
func (s *Service) candidates(ctx context.Context, p *searchPlan, query string, docs *docSet, rm datasets.RetrievalModel) ([]cand, error) {
	var cands []cand
	if len(p.economy) > 0 {
		c, err := s.keywordCandidates(ctx, ids(p.economy), query, docs, p.pool)
		if err != nil {
			return nil, err
		}
		cands = append(cands, c...)
	}
	if len(p.quality) > 0 {
		var c []cand
		var err error
		switch rm.SearchMethod {
		case datasets.SearchKeyword:
			c, err = s.keywordCandidates(ctx, ids(p.quality), query, docs, p.pool)
		case datasets.SearchFullText:
			lim := fullTextLimit(p.pool)
			if p.short {
				lim = shortLimit(p.pool)
			}
			c, err = s.fullTextCandidates(ctx, ids(p.quality), query, docs, lim)
		case datasets.SearchHybrid:
			c, err = s.hybridCandidates(ctx, p.quality, query, docs, p.pool, rm)
		default:
			c, err = s.semanticCandidates(ctx, p.quality, query, docs, semanticLimit(p.pool))
		}
		if err != nil {
			return nil, err
		}
		cands = append(cands, c...)
	}
	return cands, nil
}

// collectHits ranks cands and collects up to p.limit hits from them; when
// a bounded first ranking ran out before that, it gathers the candidates
// again without the bound and collects once more.
func (s *Service) collectHits(ctx context.Context, p *searchPlan, cands []cand, query string, docs *docSet, rm datasets.RetrievalModel) ([]Hit, error) {
	sortCands(cands)
	// Chunks and child chunks were ranked apart; only the first shortLimit
	// of both together are surely the first of a full ranking.
	truncated := p.short && len(cands) >= shortLimit(p.pool)
	if truncated {
		cands = cands[:shortLimit(p.pool)]
	}
	hits, exhausted, err := s.collect(ctx, cands, docs, p.limit, p.threshold, !p.rerank)
	if err != nil {
		return nil, err
	}
	if exhausted && truncated {
		if cands, err = s.fullTextCandidates(ctx, ids(p.quality), query, docs, fullTextLimit(p.pool)); err != nil {
			return nil, err
		}
		sortCands(cands)
		if hits, _, err = s.collect(ctx, cands, docs, p.limit, p.threshold, !p.rerank); err != nil {
			return nil, err
		}
	}
	// Semantic search keeps only its best candidates. When disabled chunks
	// used them all up before limit hits were found, score every vector
	// again without the bound: slow, but rare.
	if exhausted && len(p.economy) == 0 && len(p.quality) > 0 && isSemantic(rm.SearchMethod) && len(cands) >= semanticLimit(p.pool) {
		if cands, err = s.semanticCandidates(ctx, p.quality, query, docs, 0); err != nil {
			return nil, err
		}
		sortCands(cands)
		if hits, _, err = s.collect(ctx, cands, docs, p.limit, p.threshold, !p.rerank); err != nil {
			return nil, err
		}
	}
	return hits, nil
}

// nameHits sets the knowledge base name of every hit.
func nameHits(hits []Hit, rows []models.Dataset) {
	names := map[string]string{}
	for _, d := range rows {
		names[d.ID] = d.Name
	}
	for i := range hits {
		hits[i].DatasetName = names[hits[i].DatasetID]
	}
}

// fullTextLimit is how many full-text candidates (chunks, and child
// chunks apart) a search with the given pool ranks.
func fullTextLimit(pool int) int { return pool*10 + 100 }

// shortLimit is how many a plain full-text search ranks at first.
func shortLimit(pool int) int { return pool * 2 }

// semanticLimit is how many semantic candidates a search with the given
// pool keeps.
func semanticLimit(pool int) int { return pool*10 + 100 }

// isSemantic tells whether method is served by semanticCandidates alone.
func isSemantic(method string) bool {
	switch method {
	case datasets.SearchKeyword, datasets.SearchFullText, datasets.SearchHybrid:
		return false
	}
	return true
}

func ids(rows []models.Dataset) []string {
	out := make([]string, len(rows))
	for i := range rows {
		out[i] = rows[i].ID
	}
	return out
}

// cand is a scored chunk (child empty) or child chunk.
type cand struct {
	segment, child string
	score          float64
}

func sortCands(c []cand) {
	sort.SliceStable(c, func(i, j int) bool { return c[i].score > c[j].score })
}

// collect turns candidates, best first, into hits: it drops those of
// chunks or documents that may not be returned, merges child chunks into
// their parent and stops after limit accepted candidates. With
// stopAtThreshold, candidates below threshold end the walk. exhausted
// reports that every candidate was looked at and fewer than limit passed.
func (s *Service) collect(ctx context.Context, cands []cand, docs *docSet, limit int, threshold *float64, stopAtThreshold bool) (hits []Hit, exhausted bool, err error) {
	hits = []Hit{}
	index := map[string]int{} // segment id → position in hits
	bad := map[string]bool{}  // segment ids that may not be returned
	segs := map[string]*models.Segment{}
	accepted := 0
	// The first stretch is small: its best candidates nearly always pass,
	// and each one read costs a chunk and a document row. Later stretches
	// are larger.
	for start, window := 0, max(limit*2, 8); start < len(cands) && accepted < limit; start, window = start+window, max(limit*4, 32) {
		part := cands[start:min(start+window, len(cands))]
		var need []string
		for _, c := range part {
			if _, ok := segs[c.segment]; !ok && !bad[c.segment] {
				need = append(need, c.segment)
			}
		}
		if len(need) > 0 {
			var rows []models.Segment
			if err := s.db.WithContext(ctx).Where("id IN ? AND enabled AND status = 'completed'", uniq(need)).Find(&rows).Error; err != nil {
				return nil, false, err
			}
			var docIDs []string
			for i := range rows {
				if docs.allowed[rows[i].DocumentID] {
					segs[rows[i].ID] = &rows[i]
					docIDs = append(docIDs, rows[i].DocumentID)
				}
			}
			if err := s.load(ctx, docs, docIDs); err != nil {
				return nil, false, err
			}
			for _, id := range need {
				if segs[id] == nil {
					bad[id] = true
				}
			}
		}
		for _, c := range part {
			if accepted >= limit {
				break
			}
			if stopAtThreshold && threshold != nil && c.score < *threshold {
				hits, err = s.fillChildren(ctx, hits)
				return hits, false, err
			}
			seg := segs[c.segment]
			if seg == nil || docs.byID[seg.DocumentID] == nil {
				continue
			}
			accepted++
			i, ok := index[seg.ID]
			if !ok {
				d := docs.byID[seg.DocumentID]
				i = len(hits)
				index[seg.ID] = i
				hits = append(hits, Hit{DatasetID: seg.DatasetID, Segment: *seg, Score: c.score, Document: d.summary()})
			}
			if c.child != "" {
				hits[i].ChildChunks = append(hits[i].ChildChunks, ChildHit{ID: c.child, Score: c.score})
			}
		}
	}
	hits, err = s.fillChildren(ctx, hits)
	return hits, accepted < limit, err
}

// fillChildren loads the text and place of the matched child chunks.
func (s *Service) fillChildren(ctx context.Context, hits []Hit) ([]Hit, error) {
	var idList []string
	for _, h := range hits {
		for _, c := range h.ChildChunks {
			idList = append(idList, c.ID)
		}
	}
	if len(idList) == 0 {
		return hits, nil
	}
	var rows []models.ChildChunk
	if err := s.db.WithContext(ctx).Where("id IN ?", idList).Find(&rows).Error; err != nil {
		return nil, err
	}
	byID := map[string]*models.ChildChunk{}
	for i := range rows {
		byID[rows[i].ID] = &rows[i]
	}
	for i := range hits {
		kept := hits[i].ChildChunks[:0]
		for _, c := range hits[i].ChildChunks {
			if r := byID[c.ID]; r != nil {
				c.Content, c.Position = r.Content, r.Position
				kept = append(kept, c)
			}
		}
		if hits[i].ChildChunks != nil {
			hits[i].ChildChunks = kept
		}
	}
	return hits, nil
}

func uniq(in []string) []string {
	seen := map[string]bool{}
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func applyThreshold(hits []Hit, threshold *float64) []Hit {
	if threshold == nil {
		return hits
	}
	out := hits[:0]
	for _, h := range hits {
		if h.Score >= *threshold {
			out = append(out, h)
		}
	}
	return out
}

// countHits adds one to the hit_count of each returned chunk, and to the
// copies in hits.
func (s *Service) countHits(ctx context.Context, hits []Hit) error {
	if len(hits) == 0 {
		return nil
	}
	idList := make([]string, len(hits))
	for i := range hits {
		idList[i] = hits[i].Segment.ID
		hits[i].Segment.HitCount++
	}
	return s.db.WithContext(ctx).Exec(`UPDATE segments SET hit_count = hit_count + 1 WHERE id IN ?`, idList).Error
}

// metadataJSON decodes a document's stored metadata values.
func metadataJSON(s string) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal([]byte(s), &m)
	return m
}
