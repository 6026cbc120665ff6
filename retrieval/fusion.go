package retrieval

import (
	"context"
	"slices"
	"sort"
	"strings"

	"appkb/knowledge"
	"appkb/llm"
)

// Joining candidate lists (the maximum for several knowledge bases,
// weighted reciprocal rank fusion for hybrid search) and reranking hits.

type candKey struct{ segment, child string }

// fuseMax merges candidate lists, keeping each candidate's best score.
func fuseMax(lists ...[]cand) []cand {
	merged := map[candKey]int{}
	var out []cand
	for _, l := range lists {
		for _, c := range l {
			k := candKey{c.segment, c.child}
			if i, ok := merged[k]; ok {
				out[i].score = max(out[i].score, c.score)
				continue
			}
			merged[k] = len(out)
			out = append(out, c)
		}
	}
	return out
}

// rrfK damps the reciprocal rank fusion; 60 is the customary value.
const rrfK = 60

// fuseScores is weighted reciprocal rank fusion of semantic and full-text
// candidates (see hybridCandidates).
func fuseScores(sem, ft []cand, vw, kw float64) []cand {
	merged := map[candKey]int{}
	var out []cand
	for side, list := range [][]cand{sem, ft} {
		w := vw
		if side == 1 {
			w = kw
		}
		list = slices.Clone(list)
		sortCands(list)
		for rank, c := range list {
			k := candKey{c.segment, c.child}
			i, ok := merged[k]
			if !ok {
				i = len(out)
				merged[k] = i
				out = append(out, cand{segment: c.segment, child: c.child})
			}
			out[i].score += w / float64(rrfK+rank+1)
		}
	}
	// Rescale so that a chunk ranked first by both sides scores 1, as
	// thresholds written for Dify's [0, 1] scores expect.
	if top := (max(vw, 0) + max(kw, 0)) / float64(rrfK+1); top > 0 {
		for i := range out {
			out[i].score /= top
		}
	}
	return out
}

// weights returns the vector and keyword weights of hybrid search; Dify's
// default leans on the vector side (0.7 / 0.3).
func weights(w *knowledge.Weights) (float64, float64) {
	vw, kw := 0.7, 0.3
	if w == nil {
		return vw, kw
	}
	if w.VectorSetting != nil && w.VectorSetting.VectorWeight != nil {
		vw = *w.VectorSetting.VectorWeight
	}
	if w.KeywordSetting != nil && w.KeywordSetting.KeywordWeight != nil {
		kw = *w.KeywordSetting.KeywordWeight
	}
	return vw, kw
}

// rerank orders hits by the rerank model's scores, which replace theirs.
// Parent-child hits are judged by their matching child chunks' text.
func (s *Service) rerank(ctx context.Context, query string, hits []Hit, m *knowledge.RerankingModel) ([]Hit, error) {
	if len(hits) == 0 {
		return hits, nil
	}
	r, err := s.models.Rerank(m.ProviderName, m.ModelName)
	if err != nil {
		return nil, err
	}
	texts := make([]string, len(hits))
	for i, h := range hits {
		texts[i] = h.Segment.Content
		if len(h.ChildChunks) > 0 {
			parts := make([]string, len(h.ChildChunks))
			for j, c := range h.ChildChunks {
				parts[j] = c.Content
			}
			texts[i] = strings.Join(parts, "\n")
		}
	}
	res, err := r.Rerank(ctx, query, texts, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Hit, 0, len(res))
	for _, x := range res {
		if x.Index < 0 || x.Index >= len(hits) {
			continue
		}
		h := hits[x.Index]
		h.Score = x.Score
		out = append(out, h)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	if backend, _ := s.models.Backend(m.ProviderName); backend == llm.BackendBuiltin {
		out = blendRanks(hits, out)
	}
	return out, nil
}

// blendRanks joins the order the search found (first) with the order of
// the builtin reranker (reranked, best first) by reciprocal rank fusion,
// the search's order weighing twice as much. The builtin reranker only counts shared words, so on
// its own it would undo much of what BM25 and the vectors knew; blended,
// it breaks ties and lifts chunks both agree on. Scores are rescaled so
// that a chunk first in both orders scores 1.
func blendRanks(first, reranked []Hit) []Hit {
	pos := make(map[string]int, len(first))
	for i := range first {
		pos[first[i].Segment.ID] = i
	}
	type scored struct {
		h     Hit
		fused float64
	}
	all := make([]scored, 0, len(reranked))
	for r, h := range reranked {
		f, ok := pos[h.Segment.ID]
		if !ok {
			f = len(first)
		}
		all = append(all, scored{h, (2/float64(rrfK+f+1) + 1/float64(rrfK+r+1)) * float64(rrfK+1) / 3})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].fused > all[j].fused })
	out := make([]Hit, len(all))
	for i, x := range all {
		out[i] = x.h
		out[i].Score = x.fused
	}
	return out
}
