package retrieval

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/llm"
	"appkb/models"
)

// Joining candidate lists (the maximum for several knowledge bases, the
// weighted sum of scores for hybrid search) and reranking hits.

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

// fuseScores joins semantic and full-text candidates the way Dify's
// weighted_score mode does (its WeightRerankRunner): a chunk scores
// vector weight × its cosine similarity + keyword weight × its keyword
// score, here the full-text candidate's BM25 strength divided by the best
// strength among the full-text candidates (so the best scores 1), where
// Dify computes a TF-IDF cosine over the candidates. A chunk the full-text
// side found but the semantic side did
// not keep gets the lowest cosine the semantic side kept: its own is no
// higher. A chunk without a full-text match gets keyword score 0.
// Negative cosines count as 0. The sum is divided by the sum of the
// weights, so scores stay in [0, 1] and thresholds written for Dify's
// scores keep their meaning.
//
// Scores, not ranks: a side that is sure (one chunk far above the others)
// moves the fused order more than a side whose scores are all alike,
// which ranks hide. bench/README.md (Quality) compares it with weighted
// reciprocal rank fusion, which appkb used before.
func fuseScores(sem, ft []cand, vw, kw float64) []cand {
	vw, kw = max(vw, 0), max(kw, 0)
	// Best first on each side, so that equal fused scores keep the
	// semantic order, then the full-text order.
	sem, ft = slices.Clone(sem), slices.Clone(ft)
	sortCands(sem)
	sortCands(ft)
	merged := make(map[candKey]int, len(sem)+len(ft))
	out := make([]cand, 0, len(sem)+len(ft))
	// Each side is scaled so that its best candidate scores 1: cosines of
	// one model sit in a narrow band of their own (the builtin models'
	// rarely pass 0.5, trained models' rarely fall below 0.3) and the
	// full-text side's strengths have no fixed scale, so unscaled the
	// weights would not say how much each side counts.
	if len(sem) > 0 && sem[0].score > 0 {
		top := sem[0].score
		for i := range sem {
			sem[i].score /= top
		}
	}
	floor := 0.0
	if len(sem) > 0 {
		floor = max(sem[len(sem)-1].score, 0)
	}
	for _, c := range sem {
		k := candKey{c.segment, c.child}
		if _, ok := merged[k]; ok {
			continue // a chunk counts once per side, with its best score
		}
		merged[k] = len(out)
		out = append(out, cand{segment: c.segment, child: c.child, score: vw * max(c.score, 0)})
	}
	// The full-text side is scaled so that its best candidate scores 1
	// (see ftNormalise).
	ft = ftNormalise(ft)
	seen := make(map[candKey]bool, len(ft))
	for _, c := range ft {
		k := candKey{c.segment, c.child}
		if seen[k] {
			continue
		}
		seen[k] = true
		i, ok := merged[k]
		if !ok {
			i = len(out)
			merged[k] = i
			out = append(out, cand{segment: c.segment, child: c.child, score: vw * floor})
		}
		out[i].score += kw * c.score
	}
	if sum := vw + kw; sum > 0 {
		for i := range out {
			out[i].score /= sum
		}
	}
	return out
}

// ftNormalise maps full-text candidates' scores (fullTextScore of a BM25
// strength) to the share of the best strength among them. fullTextScore
// flattens strong matches towards 1 (a long query matches many chunks
// with strengths of 10 to 40, all scoring 0.9 and more), which leaves the
// keyword side of a weighted sum next to no say in the order.
func ftNormalise(ft []cand) []cand {
	best := 0.0
	for _, c := range ft {
		best = max(best, strengthOf(c.score))
	}
	if best <= 0 {
		return ft
	}
	for i := range ft {
		ft[i].score = strengthOf(ft[i].score) / best
	}
	return ft
}

// strengthOf inverts fullTextScore.
func strengthOf(score float64) float64 {
	if score <= 0 {
		return 0
	}
	if score >= 1 {
		return math.MaxFloat64
	}
	return score / (1 - score)
}

// Default weights of hybrid search when the request names none. Dify's
// 0.7 vector / 0.3 keyword suits a trained embedding model; the builtin
// embedding models are lexical (hashed word and character features), a
// weaker copy of what full-text search already does, so for knowledge
// bases that use them the keyword side leads (on BEIR ArguAna, nDCG@10
// 0.448 at 0.3/0.7 against 0.393 at 0.7/0.3 and 0.439 for full text
// alone; see bench/README.md).
const (
	defaultVectorWeight, defaultKeywordWeight               = 0.7, 0.3
	builtinDefaultVectorWeight, builtinDefaultKeywordWeight = 0.3, 0.7
)

// weights returns the vector and keyword weights of hybrid search: those
// of the request, else the default for the embedding models (builtin
// tells whether every knowledge base searched uses a builtin one).
func weights(w *datasets.Weights, builtin bool) (float64, float64) {
	vw, kw := defaultVectorWeight, defaultKeywordWeight
	if builtin {
		vw, kw = builtinDefaultVectorWeight, builtinDefaultKeywordWeight
	}
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

// builtinEmbeddings tells whether every knowledge base embeds with a
// provider of the builtin backend.
func (s *Service) builtinEmbeddings(kbs []models.Dataset) bool {
	builtin := map[string]bool{}
	for _, pm := range s.models.Catalog(llm.TypeEmbedding) {
		if pm.Backend == llm.BackendBuiltin {
			builtin[pm.Provider] = true
		}
	}
	for _, d := range kbs {
		if !builtin[d.EmbeddingModelProvider] {
			return false
		}
	}
	return len(kbs) > 0
}

// rerank orders hits by the rerank model's scores, which replace theirs.
// Parent-child hits are judged by their matching child chunks' text.
//
// The builtin reranker is a lexical one: 0.7 for the query words a hit
// shares (weighted by rarity among the hits), 0.3 for the builtin
// embedding's cosine. Alone it ranks worse than the first stages it would
// reorder: on ArguAna (250 queries, TestArguAna) nDCG@10 fell from 0.439
// to 0.275 after full-text search and from 0.286 to 0.252 after semantic
// search. So it is used with care:
//   - after a lexical first stage (full-text, keyword, hybrid, or any
//     economy knowledge base searched), it would only repeat a cruder
//     form of the signal that ranked the hits; the first-stage order and
//     scores are kept (lexical). Any blend of it lowered full-text nDCG
//     (0.1 of it: 0.383);
//   - after semantic search it adds the lexical signal the vectors lack:
//     its scores are blended with the first stage's (blendBuiltin, 0.3 of
//     it: 0.304 against 0.286 without);
//   - the hits of an app's several knowledge bases, each searched its own
//     way (stageMixed), have scores on different scales: there its scores
//     alone order them, as before.
//
// Rerank models of providers are applied as Dify applies them.
func (s *Service) rerank(ctx context.Context, query string, hits []Hit, m *datasets.RerankingModel, first firstStage) ([]Hit, error) {
	if len(hits) == 0 {
		return hits, nil
	}
	builtin := s.builtinReranker(m.ProviderName)
	if builtin && first == stageLexical {
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
	scores := make([]float64, 0, len(res))
	for _, x := range res {
		if x.Index < 0 || x.Index >= len(hits) {
			continue
		}
		out = append(out, hits[x.Index])
		scores = append(scores, x.Score)
	}
	if builtin && first == stageSemantic {
		scores = blendBuiltin(out, scores)
	}
	for i := range out {
		out[i].Score = scores[i]
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out, nil
}

// firstStage is what ranked the hits a rerank model reorders.
type firstStage int

const (
	stageLexical  firstStage = iota // full-text, keyword or hybrid search
	stageSemantic                   // semantic search alone
	stageMixed                      // several searches, scores not comparable
)

// builtinRerankWeight is the part of the builtin reranker's score in the
// blended score; the rest is the first stage's (see blendBuiltin).
var builtinRerankWeight = 0.3

// blendBuiltin returns, for hits (in the reranker's order, each with its
// first-stage score), the builtin reranker's scores blended with the
// first stage: builtinRerankWeight times the reranker's score plus the
// rest times the first-stage score divided by the best first-stage score
// among the hits, so both sides lie in [0, 1] and a hit far down the
// first stage cannot jump to the top on shared words alone. Without
// first-stage strength (all scores 0) the reranker's scores stand.
func blendBuiltin(hits []Hit, rerank []float64) []float64 {
	best := 0.0
	for _, h := range hits {
		best = max(best, h.Score)
	}
	out := make([]float64, len(rerank))
	for i, r := range rerank {
		if best <= 0 {
			out[i] = r
			continue
		}
		out[i] = builtinRerankWeight*r + (1-builtinRerankWeight)*max(0, hits[i].Score)/best
	}
	return out
}

// builtinReranker tells whether provider serves the builtin rerank model.
func (s *Service) builtinReranker(provider string) bool {
	name := llm.NormalizeProvider(provider)
	for _, pm := range s.models.Catalog(llm.TypeRerank) {
		if pm.Backend == llm.BackendBuiltin && (pm.Provider == provider || llm.NormalizeProvider(pm.Provider) == name) {
			return true
		}
	}
	return false
}
