package retrieval

import (
	"context"
	"fmt"

	appdb "appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// semanticCandidates scores every stored vector of the knowledge bases'
// embedding models against the query.
// Only vectors of allowed documents count; with limit > 0 only the limit
// best candidates are kept, best first.
func (s *Service) semanticCandidates(ctx context.Context, datasetIDs []models.Dataset, query string, docs *docSet, limit int) ([]cand, error) {
	// Start the checks of the cached vectors first, so that they run while
	// the query is embedded and scored (see scoreDataset).
	sigs := make([]chan sigResult, len(datasetIDs))
	for i, d := range datasetIDs {
		sigs[i] = s.checkVectors(ctx, d.ID, documents.ModelKey(d.EmbeddingModelProvider, d.EmbeddingModel))
	}
	qvecs := map[string][]float32{}
	var out []cand
	for i, d := range datasetIDs {
		key := documents.ModelKey(d.EmbeddingModelProvider, d.EmbeddingModel)
		qv, ok := qvecs[key]
		if !ok {
			e, err := s.models.Embedding(d.EmbeddingModelProvider, d.EmbeddingModel)
			if err != nil {
				return nil, err
			}
			vecs, _, err := e.Embed(ctx, []string{query})
			if err != nil {
				return nil, err
			}
			if len(vecs) != 1 {
				return nil, apperr.Internal(fmt.Errorf("the embedding model returned %d vectors for one text", len(vecs)))
			}
			qv = vecs[0]
			qvecs[key] = qv
		}
		scored, err := s.scoreDataset(ctx, d.ID, key, qv, docs, limit, sigs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, scored...)
	}
	if limit > 0 && len(datasetIDs) > 1 {
		sortCands(out)
		if len(out) > limit {
			out = out[:limit]
		}
	}
	return out, nil
}

// sigResult is the outcome of checkVectors: the signature of the stored
// vectors, and (SQLite) the signature of the whole table read before it.
type sigResult struct {
	sig, table string
	err        error
}

// checkVectors reads the signature of the stored vectors of a knowledge
// base on its own goroutine; the channel receives it once.
func (s *Service) checkVectors(ctx context.Context, datasetID, model string) chan sigResult {
	c := make(chan sigResult, 1)
	go func() {
		var r sigResult
		defer func() {
			if p := recover(); p != nil {
				r = sigResult{err: apperr.Internal(fmt.Errorf("retrieval: reading the vector signature panicked: %v", p))}
			}
			c <- r
		}()
		if !appdb.IsPostgres(s.db) {
			// A cheap look at the whole table first: when it is as it was
			// the last time the cached set was found current, so is the
			// set, and the count over the set's rows is not needed.
			if r.table, r.err = tableSignature(ctx, s.db); r.err != nil {
				return
			}
			if set := cachedSet(datasetID, model); set != nil {
				if t := set.verified.Load(); t != nil && *t == r.table {
					r.sig = set.sig
					return
				}
			}
		}
		r.sig, r.err = signatureOf(ctx, s.db, datasetID, model)
	}()
	return c
}

// scoreDataset scores the vectors of one knowledge base. Checking that
// the cached vectors are current costs an SQL count, about as long as the
// scoring itself at 50,000 vectors; so the check (sigc, from checkVectors)
// runs meanwhile, and the scores of the cached vectors are used only if
// the check then finds them current. Otherwise the vectors are read again
// and scored anew.
func (s *Service) scoreDataset(ctx context.Context, datasetID, model string, qv []float32, docs *docSet, limit int, sigc chan sigResult) ([]cand, error) {
	set := cachedSet(datasetID, model)
	var out []cand
	if set != nil {
		out = set.score(qv, docs, limit)
	}
	r := <-sigc
	if r.err != nil {
		return nil, r.err
	}
	if set != nil && set.sig == r.sig {
		set.markVerified(r.table)
		return out, nil
	}
	set, err := loadVectors(ctx, s.db, datasetID, model, r.sig)
	if err != nil {
		return nil, err
	}
	set.markVerified(r.table)
	return set.score(qv, docs, limit), nil
}

// hybridCandidates joins semantic and full-text candidates.
//
// With weighted scoring (no rerank model follows) the two lists are joined
// by fuseScores, the weighted sum of cosine similarity and full-text score
// that Dify's weighted_score mode computes. When a rerank model follows, a
// candidate keeps the better of its two raw scores.
//
// The full-text query runs on its own goroutine while the query is
// embedded and the vectors scored; the two lists are joined only once both
// are complete, so the result is the same as running one after the other.
// Either side failing fails the search; a semantic failure cancels the
// full-text query.
func (s *Service) hybridCandidates(ctx context.Context, datasetIDs []models.Dataset, query string, docs *docSet, pool int, rm datasets.RetrievalModel) ([]cand, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ftc := goCandidates(func() ([]cand, error) {
		return s.fullTextCandidates(ctx, ids(datasetIDs), query, docs, fullTextLimit(pool))
	})
	sem, err := s.semanticCandidates(ctx, datasetIDs, query, docs, semanticLimit(pool))
	if err != nil {
		return nil, err
	}
	r := <-ftc
	if r.err != nil {
		return nil, r.err
	}
	ft := r.cands
	// The builtin rerank model keeps the order of a hybrid search (see
	// rerank), so its candidates are fused by weight as without it.
	weighted := !(rm.RerankingEnable && rm.RerankingModel != nil && rm.RerankingModel.ModelName != "" &&
		(rm.RerankingMode == nil || *rm.RerankingMode != datasets.ModeWeightedScore)) ||
		s.builtinReranker(rm.RerankingModel.ProviderName)
	if !weighted {
		return fuseMax(sem, ft), nil
	}
	vw, kw := weights(rm.Weights, s.builtinEmbeddings(datasetIDs))
	return fuseScores(sem, ft, vw, kw), nil
}

// candResult is the outcome of a candidate search run by goCandidates.
type candResult struct {
	cands []cand
	err   error
}

// goCandidates runs find on its own goroutine; the channel receives its
// outcome once. A panic in find becomes an internal error.
func goCandidates(find func() ([]cand, error)) chan candResult {
	c := make(chan candResult, 1)
	go func() {
		var r candResult
		defer func() {
			if p := recover(); p != nil {
				r = candResult{err: apperr.Internal(fmt.Errorf("retrieval: candidate search panicked: %v", p))}
			}
			c <- r
		}()
		r.cands, r.err = find()
	}()
	return c
}
