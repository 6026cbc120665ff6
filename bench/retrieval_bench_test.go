package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/retrieval"
	"appkb/internal/knowledge/textsplit"
	"appkb/internal/llm"
	"appkb/models"
)

// retrievalChunks is the size of the generated corpus; APPKB_BENCH_CHUNKS
// overrides it (the target is measured at 50000).
func retrievalChunks() int {
	if n, err := strconv.Atoi(os.Getenv("APPKB_BENCH_CHUNKS")); err == nil && n > 0 {
		return n
	}
	return 5000
}

// commonWords are real words the benchmark queries use; they are mixed
// into the generated vocabulary so that queries have matches.
var commonWords = strings.Fields(`tea coffee water bicycle chain oil garden flower seed river bridge
mountain snow winter summer market price invoice refund order shipping parcel office meeting
printer paper network router cable server backup disk memory battery charger screen keyboard
mouse window door kitchen oven recipe bread butter cheese apple orange lemon sugar salt pepper`)

// vocabulary returns n distinct made-up words built from syllables, after
// the common words, so that the corpus has a realistic spread of terms.
func vocabulary(n int) []string {
	cons := []string{"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "st", "tr"}
	vow := []string{"a", "e", "i", "o", "u", "ai", "ou"}
	seen := map[string]bool{}
	out := append([]string(nil), commonWords...)
	for _, w := range out {
		seen[w] = true
	}
	rng := rand.New(rand.NewSource(7))
	for len(out) < n {
		var sb strings.Builder
		for s := 2 + rng.Intn(2); s > 0; s-- {
			sb.WriteString(cons[rng.Intn(len(cons))])
			sb.WriteString(vow[rng.Intn(len(vow))])
		}
		if rng.Intn(2) == 0 {
			sb.WriteString(cons[rng.Intn(len(cons))])
		}
		if w := sb.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// textGen draws words with a Zipf distribution over a shuffled
// vocabulary, roughly as natural text does.
type textGen struct {
	words []string
	rng   *rand.Rand
	zipf  *rand.Zipf
}

func newTextGen(seed int64, vocab int) *textGen {
	words := vocabulary(vocab)
	rng := rand.New(rand.NewSource(seed))
	rng.Shuffle(len(words), func(i, j int) { words[i], words[j] = words[j], words[i] })
	return &textGen{words: words, rng: rng, zipf: rand.NewZipf(rng, 1.07, 2, uint64(len(words)-1))}
}

// sentence returns n words ending with a full stop.
func (g *textGen) sentence(n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = g.words[g.zipf.Uint64()]
	}
	return strings.Join(words, " ") + "."
}

// vocabSize is the number of distinct words of generated text.
const vocabSize = 4000

// rssMB reads the resident set size of the process from /proc, in MB; 0
// where /proc is missing.
func rssMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// corpus is a generated knowledge base in its own database.
type corpus struct {
	once  sync.Once
	db    *gorm.DB
	id    string // the knowledge base
	rss   float64
	build time.Duration
	// heapVectors is how much the live heap grew when the vectors were
	// first loaded and indexed, rawVectors their raw size, in MB.
	heapVectors, rawVectors float64
}

var (
	corpusMu   sync.Mutex
	corpora    = map[int]*corpus{} // by chunks per document
	corpusDirs []string
)

// TestMain removes the generated corpora (a few hundred MB at 50,000
// chunks) once the benchmarks are done.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range corpusDirs {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// generatedCorpus writes a generated knowledge base straight into the
// tables indexing fills (chunks, keywords, builtin vectors, full-text
// entries through the triggers), in one transaction, once per run and
// shape. Each document has perDoc chunks of 25 to 60 words; the text does
// not depend on perDoc.
func generatedCorpus(b *testing.B, perDoc int) *corpus {
	b.Helper()
	corpusMu.Lock()
	c := corpora[perDoc]
	if c == nil {
		c = &corpus{}
		corpora[perDoc] = c
	}
	corpusMu.Unlock()
	c.once.Do(func() {
		began := time.Now()
		if keptCorpus(b, c, perDoc) {
			return
		}
		dir, err := os.MkdirTemp("", "appkb-bench-")
		if keep := os.Getenv("APPKB_BENCH_DIR"); keep != "" {
			dir = filepath.Join(keep, fmt.Sprintf("chunks-%d-%d", retrievalChunks(), perDoc))
			err = os.MkdirAll(dir, 0o755)
		} else if err == nil {
			corpusMu.Lock()
			corpusDirs = append(corpusDirs, dir)
			corpusMu.Unlock()
		}
		if err != nil {
			b.Fatal(err)
		}
		gdb, err := db.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		hq := datasets.TechniqueHighQuality
		ds, err := datasets.NewStore(gdb, nil).CreateDataset(context.Background(), datasets.Actor{}, datasets.CreateParams{Name: "bench", IndexingTechnique: &hq})
		if err != nil {
			b.Fatal(err)
		}
		var row models.Dataset
		gdb.Take(&row, "id = ?", ds.ID)
		key := documents.ModelKey(row.EmbeddingModelProvider, row.EmbeddingModel)
		gen := newTextGen(1, vocabSize)
		now := time.Now().UTC()
		n := retrievalChunks()
		err = gdb.Transaction(func(tx *gorm.DB) error {
			var docs []models.Document
			var segs []models.Segment
			var vecs []models.SegmentEmbedding
			flush := func() error {
				if len(docs) == 0 {
					return nil
				}
				if err := tx.CreateInBatches(&docs, 100).Error; err != nil {
					return err
				}
				if err := tx.CreateInBatches(&segs, 100).Error; err != nil {
					return err
				}
				if err := tx.CreateInBatches(&vecs, 100).Error; err != nil {
					return err
				}
				docs, segs, vecs = docs[:0], segs[:0], vecs[:0]
				return nil
			}
			for d := 0; d*perDoc < n; d++ {
				doc := models.Document{ID: uuid.NewString(), DatasetID: ds.ID, Position: d + 1, Name: fmt.Sprintf("doc%d", d),
					DataSourceType: "text", FileID: uuid.NewString(), FileName: "x.txt", ProcessRule: "{}", DocForm: "text_model",
					DocLanguage: "English", IndexingStatus: "completed", Enabled: true, Batch: "b", DocMetadata: "{}",
					CreatedAt: now, UpdatedAt: now}
				docs = append(docs, doc)
				for i := 0; i < perDoc && d*perDoc+i < n; i++ {
					text := gen.sentence(15+gen.rng.Intn(20)) + " " + gen.sentence(10+gen.rng.Intn(15))
					kw, _ := json.Marshal(textsplit.Keywords(text, 10))
					seg := models.Segment{ID: uuid.NewString(), DatasetID: ds.ID, DocumentID: doc.ID, Position: i + 1, Content: text,
						WordCount: len(text), Keywords: string(kw), IndexNodeID: uuid.NewString(), IndexNodeHash: "h", Enabled: true,
						Status: "completed", CreatedAt: now, UpdatedAt: now}
					segs = append(segs, seg)
					v := llm.BuiltinEmbedding2(text) // the default model's (llm.BuiltinEmbeddingModel)
					vecs = append(vecs, models.SegmentEmbedding{NodeID: seg.IndexNodeID, Model: key, DatasetID: ds.ID, SegmentID: seg.ID,
						Dims: len(v), Vector: documents.EncodeVector(v)})
				}
				if len(segs) >= 1000 {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			return flush()
		})
		if err != nil {
			b.Fatal(err)
		}
		c.build = time.Since(began)
		if os.Getenv("APPKB_BENCH_DIR") != "" {
			_ = os.WriteFile(filepath.Join(dir, "done"), nil, 0o644)
		}
		// Measure what the process keeps once the garbage of the build is
		// gone, as a server that loaded the corpus would.
		runtime.GC()
		debug.FreeOSMemory()
		c.rss = rssMB()
		c.db, c.id = gdb, ds.ID
	})
	if c.db == nil {
		b.Fatal("building the corpus failed before")
	}
	return c
}

// keptCorpus opens the corpus a former run left under APPKB_BENCH_DIR
// (set it to keep the generated database between runs: building 200,000
// chunks takes minutes). Opening it applies any migration added since, as
// an upgrade would. It reports false when there is none to reuse.
func keptCorpus(b *testing.B, c *corpus, perDoc int) bool {
	keep := os.Getenv("APPKB_BENCH_DIR")
	if keep == "" {
		return false
	}
	dir := filepath.Join(keep, fmt.Sprintf("chunks-%d-%d", retrievalChunks(), perDoc))
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		return false
	}
	began := time.Now()
	gdb, err := db.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	var ds models.Dataset
	if err := gdb.Take(&ds, "name = ?", "bench").Error; err != nil {
		b.Fatal(err)
	}
	b.Logf("reusing the corpus in %s (opened in %s)", dir, time.Since(began).Round(time.Millisecond))
	runtime.GC()
	debug.FreeOSMemory()
	c.rss = rssMB()
	c.db, c.id = gdb, ds.ID
	return true
}

// benchQueries mixes fixed queries of common words with queries drawn
// from the generated text.
func benchQueries() []string {
	qs := []string{"refund order shipping parcel", "green tea with lemon and sugar", "bicycle chain oil", "office printer paper network"}
	gen := newTextGen(99, vocabSize)
	for len(qs) < 40 {
		qs = append(qs, strings.TrimSuffix(gen.sentence(2+gen.rng.Intn(4)), "."))
	}
	return qs
}

// BenchmarkRetrieval measures one search per iteration for each method and
// reports the median latency (p50-ms) and the 99th percentile (p99-ms).
func BenchmarkRetrieval(b *testing.B) {
	c := generatedCorpus(b, 100)
	gdb, id := c.db, c.id
	svc := retrieval.New(gdb, nil)
	queries := benchQueries()
	b.Logf("corpus: %d chunks built in %s, RSS %.0f MB", retrievalChunks(), c.build.Round(time.Millisecond), c.rss)
	for _, method := range []string{datasets.SearchKeyword, datasets.SearchFullText, datasets.SearchSemantic, datasets.SearchHybrid} {
		b.Run(method, func(b *testing.B) {
			rm := datasets.RetrievalModel{SearchMethod: method, TopK: 4}
			var before runtime.MemStats
			if method == datasets.SearchSemantic && c.heapVectors == 0 {
				runtime.GC()
				runtime.ReadMemStats(&before)
			}
			// Warm the vector cache, as a running server would have.
			if _, err := svc.Search(context.Background(), []string{id}, queries[0], rm); err != nil {
				b.Fatal(err)
			}
			// Large sets get an approximate vector index built in the
			// background, and full-text search reads its ranking index in
			// the background too; wait for them (at most a minute each) to
			// measure the steady state.
			if method == datasets.SearchSemantic || method == datasets.SearchHybrid {
				waitIndex(b, gdb, id)
			}
			if method == datasets.SearchFullText || method == datasets.SearchHybrid {
				waitText(b, svc, id)
			}
			if method == datasets.SearchSemantic && c.heapVectors == 0 {
				// What the vector cache holds: the live heap the first
				// semantic search added, next to the raw size of the vectors
				// (four bytes a dimension).
				var after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&after)
				c.heapVectors = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
				c.rawVectors = vectorsRawMB(b, gdb, id)
				b.Logf("vectors: %.1f MB raw, heap grew %.1f MB (%.2f×)", c.rawVectors, c.heapVectors, c.heapVectors/c.rawVectors)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if _, err := svc.Search(context.Background(), []string{id}, queries[i%len(queries)], rm); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(c.rss, "rss-corpus-MB")
			b.ReportMetric(rssMB(), "rss-after-MB")
			if method == datasets.SearchSemantic && c.rawVectors > 0 {
				b.ReportMetric(c.heapVectors, "heap-vectors-MB")
				b.ReportMetric(c.rawVectors, "raw-vectors-MB")
				b.ReportMetric(c.heapVectors/c.rawVectors, "heap/raw")
			}
		})
	}
}

// waitIndex waits until the knowledge base's vectors have their
// approximate index, when the set is large enough to get one.
func waitIndex(b *testing.B, gdb *gorm.DB, datasetID string) {
	var ds models.Dataset
	if err := gdb.Take(&ds, "id = ?", datasetID).Error; err != nil {
		b.Fatal(err)
	}
	key := documents.ModelKey(ds.EmbeddingModelProvider, ds.EmbeddingModel)
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(50 * time.Millisecond) {
		if retrieval.VectorIndexReady(datasetID, key) {
			b.Logf("vector index ready after %s", time.Since(start).Round(time.Millisecond))
			return
		}
		if retrievalChunks() < 20000 {
			return
		}
	}
	b.Log("vector index not ready after a minute; measuring anyway")
}

// vectorsRawMB is the raw size of the knowledge base's stored vectors
// (four bytes a dimension), in MB.
func vectorsRawMB(b *testing.B, gdb *gorm.DB, datasetID string) float64 {
	var raw int64
	if err := gdb.Raw(`SELECT COALESCE(SUM(LENGTH(vector)), 0) FROM segment_embeddings WHERE dataset_id = ?`, datasetID).Scan(&raw).Error; err != nil {
		b.Fatal(err)
	}
	return float64(raw) / (1 << 20)
}

// waitText waits until full-text search over the knowledge base ranks
// with its in-memory index rather than through SQL.
func waitText(b *testing.B, svc *retrieval.Service, datasetID string) {
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(50 * time.Millisecond) {
		if svc.TextIndexReady(context.Background(), datasetID) {
			b.Logf("full-text index ready after %s", time.Since(start).Round(time.Millisecond))
			return
		}
	}
	b.Log("full-text index not ready after a minute; measuring anyway")
}
