package retrieval

import (
	"context"

	"appkb/internal/knowledge/textsplit"
	"appkb/models"
)

// keywordCandidates scores chunks by the share of the query's keywords
// among their stored keywords. Child chunks of parent-child documents
// that share a query keyword are attached to their parent.
func (s *Service) keywordCandidates(ctx context.Context, datasetIDs []string, query string, docs *docSet, pool int) ([]cand, error) {
	kw := textsplit.Keywords(query, 50)
	if len(kw) == 0 {
		return nil, nil
	}
	rows, err := s.keywordMatches(ctx, datasetIDs, kw, docs, pool*10+100)
	if err != nil {
		return nil, err
	}
	out := make([]cand, 0, len(rows))
	var parents []string
	for _, r := range rows {
		out = append(out, cand{segment: r.ID, score: float64(r.N) / float64(len(kw))})
		if r.Form == formHierarchical {
			parents = append(parents, r.ID)
		}
	}
	if len(parents) == 0 {
		return out, nil
	}
	// Parent-child chunks: the children that share keywords become the
	// candidates, so that hits carry them.
	var children []models.ChildChunk
	if err := s.db.WithContext(ctx).Where("segment_id IN ?", parents).Order("position").Find(&children).Error; err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, k := range kw {
		want[k] = true
	}
	isParent := map[string]bool{}
	for _, p := range parents {
		isParent[p] = true
	}
	kept := out[:0]
	for _, c := range out {
		if !isParent[c.segment] {
			kept = append(kept, c)
		}
	}
	for _, ch := range children {
		n := 0
		for _, k := range textsplit.Keywords(ch.Content, 1000) {
			if want[k] {
				n++
			}
		}
		if n > 0 {
			kept = append(kept, cand{segment: ch.SegmentID, child: ch.ID, score: float64(n) / float64(len(kw))})
		}
	}
	return kept, nil
}

// keywordMatch is a chunk that has some of the query's keywords: n of
// them.
type keywordMatch struct {
	ID   string
	N    int
	Form string
}

// keywordMatches returns the first limit chunks that searches may return,
// by number of the keywords kw they have (most first, then lower seq). The
// counts come from the inverted index segment_keywords (migration 0026)
// alone; only the best of them are then looked up in segments and
// checked against the documents allowed. When checks drop some, the
// ranking is read again further down, until limit chunks pass or every
// match has been seen, so the answer is the one a scan of all the chunks
// would give.
func (s *Service) keywordMatches(ctx context.Context, datasetIDs, kw []string, docs *docSet, limit int) ([]keywordMatch, error) {
	for fetch := limit; ; fetch *= 4 {
		var ranked []struct {
			Seq int64
			N   int
		}
		err := s.db.WithContext(ctx).Table("segment_keywords").Select("seq, COUNT(*) AS n").
			Where("dataset_id IN ? AND keyword IN ?", datasetIDs, kw).
			Group("seq").Order("n DESC, seq").Limit(fetch).Scan(&ranked).Error
		if err != nil {
			return nil, err
		}
		seqs := make([]int64, len(ranked))
		for i, r := range ranked {
			seqs[i] = r.Seq
		}
		facts := map[int64]keywordFacts{}
		for start := 0; start < len(seqs); start += 500 {
			var part []keywordFacts
			err := s.db.WithContext(ctx).Table("segments AS s").
				Select("s.seq AS seq, s.id AS id, s.document_id AS document_id, s.enabled AS enabled, d.doc_form AS form").
				Joins("JOIN documents AS d ON d.id = s.document_id").
				Where("s.seq IN ?", seqs[start:min(start+500, len(seqs))]).Scan(&part).Error
			if err != nil {
				return nil, err
			}
			for _, f := range part {
				facts[f.Seq] = f
			}
		}
		out := make([]keywordMatch, 0, min(limit, len(ranked)))
		for _, r := range ranked {
			f, ok := facts[r.Seq]
			if !ok || !f.Enabled || !docs.allowed[f.DocumentID] {
				continue
			}
			out = append(out, keywordMatch{ID: f.ID, N: r.N, Form: f.Form})
			if len(out) == limit {
				break
			}
		}
		if len(out) == limit || len(ranked) < fetch {
			return out, nil
		}
	}
}

// keywordFacts is what keyword search reads of a matched chunk.
type keywordFacts struct {
	Seq        int64
	ID         string
	DocumentID string
	Enabled    bool
	Form       string
}
