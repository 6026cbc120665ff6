package retrieval

import (
	"context"
	"fmt"
	"math"
	"sync"

	"gorm.io/gorm"

	"appkb/indexing"
)

// vectorSet is the stored vectors of one knowledge base under one
// embedding model, flattened for scoring.
type vectorSet struct {
	sig      string
	dims     int
	segments []string
	children []string // "" for vectors of whole chunks
	vecs     []float32
	norms    []float32
}

// score returns the cosine of q with every vector of the set.
func (v *vectorSet) score(q []float32) []cand {
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
	out := make([]cand, len(v.segments))
	for i := range v.segments {
		row := v.vecs[i*v.dims : (i+1)*v.dims]
		var dot float32
		for j, x := range row {
			dot += x * q[j]
		}
		s := 0.0
		if v.norms[i] > 0 {
			s = float64(dot) / (float64(v.norms[i]) * qn)
		}
		out[i] = cand{segment: v.segments[i], child: v.children[i], score: s}
	}
	return out
}

// The cache of vector sets is shared by the process and keyed by
// knowledge base and model. An entry is used only while the signature of
// the stored vectors is unchanged: their number, the largest rowid, and the
// first bytes of the vector in that row. Any insert or delete changes the
// count or the largest rowid, except deleting the newest row and inserting
// one in its place, which SQLite gives the same rowid; the vector bytes
// catch that case.
var (
	cacheMu sync.Mutex
	cache   = map[string]*vectorSet{}
)

// maxCached bounds how many vector sets are kept; when full, an arbitrary
// one is dropped.
const maxCached = 64

// vectorsOf returns the current vectors of a knowledge base for a model.
func vectorsOf(ctx context.Context, db *gorm.DB, datasetID, model string) (*vectorSet, error) {
	var sig struct {
		N    int64
		Top  int64
		Head []byte
	}
	err := db.WithContext(ctx).Raw(`SELECT COUNT(*) AS n, COALESCE(MAX(rowid), 0) AS top,
		(SELECT substr(vector, 1, 32) FROM segment_embeddings WHERE rowid = (SELECT MAX(rowid) FROM segment_embeddings WHERE dataset_id = ? AND model = ?)) AS head
		FROM segment_embeddings WHERE dataset_id = ? AND model = ?`, datasetID, model, datasetID, model).Scan(&sig).Error
	if err != nil {
		return nil, err
	}
	signature := fmt.Sprintf("%d/%d/%x", sig.N, sig.Top, sig.Head)
	key := datasetID + "\x00" + model
	cacheMu.Lock()
	set := cache[key]
	cacheMu.Unlock()
	if set != nil && set.sig == signature {
		return set, nil
	}

	rows, err := db.WithContext(ctx).Raw(`SELECT segment_id, COALESCE(child_id, ''), vector FROM segment_embeddings
		WHERE dataset_id = ? AND model = ?`, datasetID, model).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	set = &vectorSet{sig: signature}
	for rows.Next() {
		var seg, child string
		var blob []byte
		if err := rows.Scan(&seg, &child, &blob); err != nil {
			return nil, err
		}
		v := indexing.DecodeVector(blob)
		if set.dims == 0 {
			set.dims = len(v)
		}
		if len(v) != set.dims {
			continue // a vector of another size cannot be compared
		}
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		set.segments = append(set.segments, seg)
		set.children = append(set.children, child)
		set.vecs = append(set.vecs, v...)
		set.norms = append(set.norms, float32(math.Sqrt(n)))
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
