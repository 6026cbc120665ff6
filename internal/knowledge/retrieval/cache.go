package retrieval

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"gorm.io/gorm"

	appdb "appkb/db"
	"appkb/internal/knowledge/retrieval/vecindex"
)

// vectorSet is the stored vectors of one knowledge base under one
// embedding model, flattened for scoring. Each vector also records which
// document its chunk belongs to (as an index into docIDs), so that a
// search can skip the vectors of documents it may not return without
// reading any chunk row.
type vectorSet struct {
	key      string // the cache key, "" for a set outside the cache
	sig      string
	dims     int
	segments []string
	// children holds the child chunk of each vector ("" for whole chunks);
	// nil while every vector is a whole chunk's, as in most sets.
	children []string
	vecs     []float32
	norms    []float32
	docOf    []int32  // index into docIDs, per vector
	docIDs   []string // the distinct documents of the set
	// orig is, per vector, its position in the order the vectors were
	// read (the load order), once the set has been rearranged by cluster
	// (see grouped); nil while the set is in load order. Ties between
	// equal scores go to the earlier vector in load order either way.
	orig []int32
	// verified is the signature of the whole table (tableSignature) when
	// the set was last found current; nil until then, and always on
	// PostgreSQL, which has a cheap per-set counter.
	verified atomic.Pointer[string]

	// ann is the approximate index of a large set, built in the
	// background on first use; until it is ready searches scan every
	// vector.
	ann      atomic.Pointer[vecindex.IVF]
	annStart sync.Once

	// mask is which of docIDs the last shared set of usable documents
	// searched with allows (see okFor).
	mask atomic.Pointer[docMask]
}

// docMask records, per entry of a vector set's docIDs, whether the
// documents of usable allow it. Both are never modified once made, so the
// mask holds as long as the two do; a change to documents brings a new
// usable set (see allowedDocuments), and a change to vectors a new set.
type docMask struct {
	usable *usableSet
	ok     []bool
}

// VectorIndexReady reports whether the cached vectors of a knowledge base
// for a model (its "provider/model" key) have their approximate index
// built and are arranged by cluster. Benchmarks wait for it to measure the
// steady state.
func VectorIndexReady(datasetID, model string) bool {
	set := cachedSet(datasetID, model)
	return set != nil && set.ann.Load() != nil && set.orig != nil
}

// annMinVectors is the size from which a set gets an approximate index.
// Below it a full scan takes about a millisecond.
const annMinVectors = 20000

// annProbe is how many clusters a search reads: a third of them, at least
// 8, so about two fifths of the vectors. The builtin embeddings (hashed
// trigrams) cluster loosely: with the default model a quarter of the
// clusters found 0.970 of the exact scan's top ten, a third 0.987 (see
// TestApproximateIndexRecall, which wants 0.98).
func annProbe(ix *vecindex.IVF) int { return max(8, ix.Lists()/3) }

// index returns the set's approximate index, or nil while there is none;
// the first call for a large set starts building it. Once built, a copy
// of the set arranged by cluster (see grouped) replaces it in the cache;
// searches that still hold this set use the index as it is.
func (v *vectorSet) index() *vecindex.IVF {
	if len(v.segments) < annMinVectors {
		return nil
	}
	if ix := v.ann.Load(); ix != nil {
		return ix
	}
	v.annStart.Do(func() {
		go func() {
			defer func() {
				if r := recover(); r != nil {
					slog.Error("retrieval: building the vector index failed", "panic", r)
				}
			}()
			ix := vecindex.Build(v.vecs, v.dims, vecindex.Options{Seed: 1, Iterations: 6})
			replaceCached(v, v.grouped(ix))
			v.ann.Store(ix)
		}()
	})
	return nil
}

// grouped returns a copy of the set whose vectors are rearranged so that
// each cluster of ix is one contiguous stretch, with the index over the new
// positions already in place. It scores exactly as v does.
func (v *vectorSet) grouped(ix *vecindex.IVF) *vectorSet {
	order, gix := ix.Grouped()
	n := len(order)
	g := &vectorSet{key: v.key, sig: v.sig, dims: v.dims, docIDs: v.docIDs,
		segments: make([]string, n), vecs: make([]float32, n*v.dims),
		norms: make([]float32, n), docOf: make([]int32, n), orig: make([]int32, n)}
	if v.children != nil {
		g.children = make([]string, n)
	}
	for k, i := range order {
		g.segments[k] = v.segments[i]
		if v.children != nil {
			g.children[k] = v.children[i]
		}
		copy(g.vecs[k*v.dims:(k+1)*v.dims], v.vecs[int(i)*v.dims:(int(i)+1)*v.dims])
		g.norms[k] = v.norms[i]
		g.docOf[k] = v.docOf[i]
		g.orig[k] = int32(v.ord(int(i)))
	}
	g.ann.Store(gix)
	g.verified.Store(v.verified.Load())
	return g
}

// markVerified records that the set was found current when the whole
// table had signature table ("" records nothing).
func (v *vectorSet) markVerified(table string) {
	if table != "" {
		v.verified.Store(&table)
	}
}

// ord is the load-order position of the vector at position i.
func (v *vectorSet) ord(i int) int {
	if v.orig == nil {
		return i
	}
	return int(v.orig[i])
}

// score returns the cosine of q with the vectors of the set whose document
// docs allows. With limit > 0 it keeps only the limit best, best first,
// in a bounded min-heap (ties go to the earlier vector, as a stable sort
// would); otherwise it returns all of them in set order.
func (v *vectorSet) score(q []float32, docs *docSet, limit int) []cand {
	return v.scoreOK(q, v.okFor(docs.allowed, docs.shared), limit, v.index())
}

// okFor tells, per entry of docIDs, whether allowed holds it. When allowed
// is the ids of the shared set usable (nil if it is not), the answer is
// kept for the next search with the same set: with one chunk per document
// it is tens of thousands of map lookups, more than the scoring of an
// indexed set.
func (v *vectorSet) okFor(allowed map[string]bool, usable *usableSet) []bool {
	if usable != nil {
		if m := v.mask.Load(); m != nil && m.usable == usable {
			return m.ok
		}
	}
	ok := make([]bool, len(v.docIDs))
	for i, id := range v.docIDs {
		ok[i] = allowed[id]
	}
	if usable != nil {
		v.mask.Store(&docMask{usable: usable, ok: ok})
	}
	return ok
}

// scoreWith is score with the documents allowed, reading only the clusters
// of ix nearest to q when ix is not nil (see vecindex), every vector
// otherwise.
func (v *vectorSet) scoreWith(q []float32, allowed map[string]bool, limit int, ix *vecindex.IVF) []cand {
	return v.scoreOK(q, v.okFor(allowed, nil), limit, ix)
}

// scoreOK is scoreWith with ok telling, per entry of docIDs, whether its
// vectors may be returned.
func (v *vectorSet) scoreOK(q []float32, ok []bool, limit int, ix *vecindex.IVF) []cand {
	if v.dims == 0 || len(q) != v.dims {
		return nil
	}
	var qn float64
	for _, x := range q {
		qn += float64(x) * float64(x)
	}
	qn = math.Sqrt(qn)
	if qn == 0 {
		return nil
	}
	var h scoreHeap
	var all []cand
	var allOrd []int32 // load-order positions of all, for a grouped set
	if limit > 0 {
		h = make(scoreHeap, 0, min(limit, len(v.segments)))
	}
	visit := func(i int) {
		if !ok[v.docOf[i]] {
			return
		}
		dot := vecindex.Dot(v.vecs[i*v.dims:(i+1)*v.dims], q)
		s := 0.0
		if v.norms[i] > 0 {
			s = float64(dot) / (float64(v.norms[i]) * qn)
		}
		if limit <= 0 {
			all = append(all, cand{segment: v.segments[i], child: v.child(i), score: s})
			if v.orig != nil {
				allOrd = append(allOrd, v.orig[i])
			}
			return
		}
		e := scored{idx: i, ord: v.ord(i), score: s}
		if len(h) < limit {
			h.push(e)
		} else if e.better(h[0]) {
			h[0] = e
			h.down(0)
		}
	}
	scanned := false
	if ix != nil && limit > 0 {
		// Score only the vectors of the clusters nearest the query. When
		// filters leave fewer than limit of them, scan everything instead.
		ix.Candidates(q, annProbe(ix), func(i int32) { visit(int(i)) })
		scanned = len(h) >= limit
		if !scanned {
			h = h[:0]
		}
	}
	if !scanned {
		for i := range v.segments {
			visit(i)
		}
	}
	if limit <= 0 {
		if v.orig != nil {
			// Back to load order, as callers get from a set never grouped.
			byOrd := make([]int, len(all))
			for k := range byOrd {
				byOrd[k] = k
			}
			sort.Slice(byOrd, func(a, b int) bool { return allOrd[byOrd[a]] < allOrd[byOrd[b]] })
			sorted := make([]cand, len(all))
			for k, j := range byOrd {
				sorted[k] = all[j]
			}
			all = sorted
		}
		return all
	}
	out := make([]cand, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		e := h.pop()
		out[i] = cand{segment: v.segments[e.idx], child: v.child(e.idx), score: e.score}
	}
	return out
}

// scored is one vector's score during a top-k search: idx is its
// position in the set, ord its position in load order.
type scored struct {
	idx, ord int
	score    float64
}

// better orders by score, then vectors earlier in load order first.
func (a scored) better(b scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.ord < b.ord
}

// scoreHeap is a min-heap by better: its root is the worst kept vector.
// It is written out rather than built on container/heap to avoid the
// interface calls in the scoring loop.
type scoreHeap []scored

func (h *scoreHeap) push(e scored) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[p].better(s[i]) {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *scoreHeap) pop() scored {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return top
}

func (h scoreHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		w := l
		if r := l + 1; r < len(h) && h[l].better(h[r]) {
			w = r
		}
		if !h[i].better(h[w]) {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// The cache of vector sets is shared by the process and keyed by
// knowledge base and model. An entry is used only while the signature of
// the stored vectors is unchanged: their number, the largest rowid, and
// the chunk and first vector bytes of that row. Any insert or delete
// changes the count or the largest rowid, except deleting the newest row
// and inserting one in its place, which SQLite gives the same rowid; the
// chunk id and vector bytes catch that case.
//
// Counting the rows of one knowledge base walks its index entries (about
// 5 ms at 50,000 vectors). Counting the whole table is nearly free (SQLite
// counts the pages of its smallest index), so on SQLite a check first
// reads the same facts for the whole table (tableSignature); if they are
// what they were when the set was last found current, no row was added or
// removed anywhere since (a new row always takes a rowid above the largest,
// or the largest's own after that row is deleted, which its chunk id and
// bytes reveal), and the per-set count is skipped.
var (
	cacheMu sync.Mutex
	cache   = map[string]*vectorSet{}
)

// maxCached bounds how many vector sets are kept; when full, an arbitrary
// one is dropped.
const maxCached = 64

// signatureOf reads the signature of the stored vectors (see above). The
// count is most of its cost: it walks the index entries of the set.
func signatureOf(ctx context.Context, db *gorm.DB, datasetID, model string) (string, error) {
	if appdb.IsPostgres(db) {
		// Triggers count every change in embedding_versions (migration
		// 0022), on whichever replica it was made.
		var v []int64
		err := db.WithContext(ctx).Raw(`SELECT version FROM embedding_versions WHERE dataset_id = ? AND model = ?`,
			datasetID, model).Scan(&v).Error
		if err != nil {
			return "", err
		}
		if len(v) == 0 {
			return "v0", nil
		}
		return fmt.Sprintf("v%d", v[0]), nil
	}
	var sig struct {
		N    int64
		Top  int64
		Head string
	}
	err := db.WithContext(ctx).Raw(`SELECT COUNT(*) AS n, COALESCE(MAX(rowid), 0) AS top,
		COALESCE((SELECT COALESCE(segment_id, '') || '/' || COALESCE(child_id, '') || '/' || hex(substr(vector, 1, 32)) FROM segment_embeddings
			WHERE rowid = (SELECT MAX(rowid) FROM segment_embeddings WHERE dataset_id = ? AND model = ?)), '') AS head
		FROM segment_embeddings WHERE dataset_id = ? AND model = ?`, datasetID, model, datasetID, model).Scan(&sig).Error
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d/%d/%s", sig.N, sig.Top, sig.Head), nil
}

// tableSignature is the signature of the whole segment_embeddings table
// on SQLite: its row count (which SQLite reads from the pages of its
// smallest index, without looking at rows), the largest rowid, and the
// knowledge base, model, chunk and first vector bytes of that row.
func tableSignature(ctx context.Context, db *gorm.DB) (string, error) {
	var rows []struct {
		N    int64
		Top  int64
		Head string
	}
	err := db.WithContext(ctx).Raw(`SELECT (SELECT COUNT(*) FROM segment_embeddings) AS n, rowid AS top,
		COALESCE(dataset_id, '') || '/' || COALESCE(model, '') || '/' || COALESCE(segment_id, '') || '/' ||
			COALESCE(child_id, '') || '/' || hex(substr(vector, 1, 32)) AS head
		FROM segment_embeddings WHERE rowid = (SELECT MAX(rowid) FROM segment_embeddings)`).Scan(&rows).Error
	if err != nil {
		return "", err
	}
	if len(rows) == 0 {
		return "empty", nil
	}
	return fmt.Sprintf("%d/%d/%s", rows[0].N, rows[0].Top, rows[0].Head), nil
}

func cacheKey(datasetID, model string) string { return datasetID + "\x00" + model }

// replaceCached puts set in the cache in place of old, unless the entry
// has changed since (reloaded vectors win over a rearranged old copy).
func replaceCached(old, set *vectorSet) {
	if old.key == "" {
		return
	}
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if cache[old.key] == old {
		cache[old.key] = set
	}
}

// cachedSet returns the cached vectors of a knowledge base for a model,
// current or not; nil if there are none.
func cachedSet(datasetID, model string) *vectorSet {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	return cache[cacheKey(datasetID, model)]
}

// loadVectors reads the vectors of a knowledge base for a model, whose
// signature is sig, and caches them.
//
// The set's arrays are sized from a count read first and the vectors are
// decoded straight into them, so that what the cache holds is the raw
// vectors plus a few words per vector (its chunk id, length and
// document), not the slack and copies of growing slices (see
// BenchmarkRetrieval's heap-vectors-MB).
func loadVectors(ctx context.Context, db *gorm.DB, datasetID, model, sig string) (*vectorSet, error) {
	key := cacheKey(datasetID, model)
	var n int64
	if err := db.WithContext(ctx).Raw(`SELECT COUNT(*) FROM segment_embeddings WHERE dataset_id = ? AND model = ?`,
		datasetID, model).Scan(&n).Error; err != nil {
		return nil, err
	}
	// A vector whose chunk is gone gets document "", which no search allows.
	rows, err := db.WithContext(ctx).Raw(`SELECT e.segment_id, COALESCE(e.child_id, ''), e.vector, COALESCE(s.document_id, '')
		FROM segment_embeddings AS e LEFT JOIN segments AS s ON s.id = e.segment_id
		WHERE e.dataset_id = ? AND e.model = ?`, datasetID, model).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	set := &vectorSet{key: key, sig: sig, segments: make([]string, 0, n), norms: make([]float32, 0, n), docOf: make([]int32, 0, n)}
	docIndex := map[string]int32{}
	var seg, child, doc string
	var blob []byte
	for rows.Next() {
		if err := rows.Scan(&seg, &child, &blob, &doc); err != nil {
			return nil, err
		}
		dims := len(blob) / 4
		if set.dims == 0 && dims > 0 {
			set.dims = dims
			set.vecs = make([]float32, 0, int(n)*dims)
		}
		if dims != set.dims || dims == 0 {
			continue // a vector of another size cannot be compared
		}
		di, ok := docIndex[doc]
		if !ok {
			di = int32(len(set.docIDs))
			docIndex[doc] = di
			set.docIDs = append(set.docIDs, doc)
		}
		at := len(set.vecs)
		set.vecs = append(set.vecs, make([]float32, dims)...)
		decodeInto(set.vecs[at:], blob)
		set.push(seg, child, set.vecs[at:], di)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	cacheMu.Lock()
	if _, ok := cache[key]; !ok && len(cache) >= maxCached {
		for k := range cache {
			delete(cache, k)
			break
		}
	}
	cache[key] = set
	cacheMu.Unlock()
	return set, nil
}

// decodeInto unpacks a vector as documents.EncodeVector packs it
// (little-endian float32) into dst, which has its length.
func decodeInto(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// child is the child chunk of the vector at position i, "" for a whole
// chunk.
func (v *vectorSet) child(i int) string {
	if v.children == nil {
		return ""
	}
	return v.children[i]
}

// add appends vector v of chunk seg (child chunk child, "" for none) of
// the document at index doc of docIDs, with its length. The first vector
// sets the dimensions.
func (set *vectorSet) add(seg, child string, v []float32, doc int32) {
	if set.dims == 0 {
		set.dims = len(v)
	}
	set.vecs = append(set.vecs, v...)
	set.push(seg, child, v, doc)
}

// push records the chunk, length and document of a vector already
// appended to vecs.
func (set *vectorSet) push(seg, child string, v []float32, doc int32) {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if child != "" && set.children == nil {
		set.children = make([]string, len(set.segments), cap(set.segments))
	}
	set.segments = append(set.segments, seg)
	if set.children != nil {
		set.children = append(set.children, child)
	}
	set.norms = append(set.norms, float32(math.Sqrt(n)))
	set.docOf = append(set.docOf, doc)
}
