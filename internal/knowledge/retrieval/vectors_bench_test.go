package retrieval

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	appdb "appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/retrieval/vecindex"
)

// benchEnv reads a positive integer from the environment, def without.
func benchEnv(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkVectorCache measures the vector cache alone at sizes and
// dimensions the builtin embedder does not produce (provider models give
// 768 to 3,072): APPKB_BENCH_VECTORS vectors (default 20,000) of
// APPKB_BENCH_DIMS dimensions (default 1,536), drawn around 500 random
// directions so that they cluster as real embeddings do, are stored, loaded
// by loadVectors as a search would load them, indexed and searched with the
// bound semantic search uses. It reports the live heap the loaded set holds
// against the raw size (heap/raw), the latency of scoring one query
// (p50-ms, p99-ms) and recall@10 of the indexed search against the exact
// scan.
func BenchmarkVectorCache(b *testing.B) {
	if vectorBench == nil {
		vectorBench = setupVectorBench(b)
	}
	vb := vectorBench
	grouped, queries, allowed, limit := vb.grouped, vb.queries, vb.allowed, vb.limit
	raw, heldIndexed, recall := vb.raw, vb.held, vb.recall
	gix := grouped.ann.Load()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		grouped.scoreWith(queries[i%len(queries)], allowed, limit, gix)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(raw, "raw-MB")
	b.ReportMetric(heldIndexed, "heap-MB")
	b.ReportMetric(heldIndexed/raw, "heap/raw")
	b.ReportMetric(recall, "recall@10")
	runtime.KeepAlive(grouped)
}

// randomUnit is a random unit vector: around centre (spread is the size
// of the noise added to it) when centre is not nil.
func randomUnit(rng *rand.Rand, dims int, centre []float32, spread float64) []float32 {
	v := make([]float32, dims)
	var s float64
	for i := range v {
		x := rng.NormFloat64()
		if centre != nil {
			x = float64(centre[i]) + spread*x/math.Sqrt(float64(dims))
		}
		v[i] = float32(x)
		s += x * x
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// vectorBenchSet is the set BenchmarkVectorCache searches, made once per
// run.
type vectorBenchSet struct {
	grouped           *vectorSet
	queries           [][]float32
	allowed           map[string]bool
	limit             int
	raw, held, recall float64
}

var vectorBench *vectorBenchSet

func setupVectorBench(b *testing.B) *vectorBenchSet {
	n, dims := benchEnv("APPKB_BENCH_VECTORS", 20000), benchEnv("APPKB_BENCH_DIMS", 1536)
	gdb, err := appdb.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	hq := datasets.TechniqueHighQuality
	ds, err := datasets.NewStore(gdb, nil).CreateDataset(context.Background(), datasets.Actor{}, datasets.CreateParams{Name: "bench", IndexingTechnique: &hq})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	const topics = 500
	centres := make([][]float32, topics)
	for i := range centres {
		centres[i] = randomUnit(rng, dims, nil, 0)
	}
	docID := uuid.NewString()
	began := time.Now()
	err = gdb.Transaction(func(tx *gorm.DB) error {
		now := time.Now().UTC()
		if err := tx.Exec(`INSERT INTO documents (id, dataset_id, position, name, data_source_type, file_id, file_name, process_rule,
			doc_form, indexing_status, enabled, batch, created_at, updated_at) VALUES (?, ?, 1, 'd', 'text', ?, 'd.txt', '{}', 'text_model', 'completed', TRUE, 'b', ?, ?)`,
			docID, ds.ID, uuid.NewString(), now, now).Error; err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			seg := uuid.NewString()
			if err := tx.Exec(`INSERT INTO segments (id, dataset_id, document_id, position, content, index_node_id, index_node_hash, enabled, status, created_at, updated_at)
				VALUES (?, ?, ?, ?, 'x', ?, 'h', TRUE, 'completed', ?, ?)`, seg, ds.ID, docID, i+1, seg, now, now).Error; err != nil {
				return err
			}
			v := randomUnit(rng, dims, centres[rng.IntN(topics)], 0.6)
			if err := tx.Exec(`INSERT INTO segment_embeddings (node_id, model, dataset_id, segment_id, dims, vector) VALUES (?, 'bench/model', ?, ?, ?, ?)`,
				seg, ds.ID, seg, dims, documents.EncodeVector(v)).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d vectors of %d dims stored in %s", n, dims, time.Since(began).Round(time.Millisecond))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	set, err := loadVectors(context.Background(), gdb, ds.ID, "bench/model", "sig")
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	raw := float64(n*dims*4) / (1 << 20)
	held := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
	ix := vecindex.Build(set.vecs, set.dims, vecindex.Options{Seed: 1, Iterations: 6})
	grouped := set.grouped(ix)
	cacheMu.Lock()
	delete(cache, set.key) // the benchmark holds the set itself
	cacheMu.Unlock()
	set = nil
	runtime.GC()
	var indexed runtime.MemStats
	runtime.ReadMemStats(&indexed)
	heldIndexed := float64(int64(indexed.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
	b.Logf("raw %.1f MB, heap after load %.1f MB (%.3f×), grouped with its index %.1f MB (%.3f×)", raw, held, held/raw, heldIndexed, heldIndexed/raw)

	allowed := map[string]bool{docID: true}
	limit := semanticLimit(16) // top_k 4, as the retrieval benchmark
	queries := make([][]float32, 50)
	for i := range queries {
		queries[i] = randomUnit(rng, dims, centres[rng.IntN(topics)], 0.6)
	}
	var hit, total int
	for _, q := range queries {
		exact := grouped.scoreWith(q, allowed, 10, nil)
		approx := grouped.scoreWith(q, allowed, limit, grouped.ann.Load())
		want := map[string]bool{}
		for _, c := range exact {
			want[c.segment] = true
		}
		for _, c := range approx[:min(10, len(approx))] {
			if want[c.segment] {
				hit++
			}
		}
		total += len(exact)
	}
	appdb.Close(gdb)
	return &vectorBenchSet{grouped: grouped, queries: queries, allowed: allowed, limit: limit,
		raw: raw, held: heldIndexed, recall: float64(hit) / float64(total)}
}
