package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"appkb/db"
	"appkb/indexing"
	"appkb/knowledge"
	"appkb/llm"
	"appkb/models"
	"appkb/retrieval"
	"appkb/textsplit"
)

// retrievalChunks is the size of the generated corpus; APPKB_BENCH_CHUNKS
// overrides it (the target is measured at 50000).
func retrievalChunks() int {
	if n, err := strconv.Atoi(os.Getenv("APPKB_BENCH_CHUNKS")); err == nil && n > 0 {
		return n
	}
	return 5000
}

var corpusWords = strings.Fields(`tea coffee water bicycle chain oil garden flower seed river bridge
mountain snow winter summer market price invoice refund order shipping parcel office meeting
printer paper network router cable server backup disk memory battery charger screen keyboard
mouse window door kitchen oven recipe bread butter cheese apple orange lemon sugar salt pepper`)

var (
	corpusOnce sync.Once
	corpusDB   *gorm.DB
	corpusID   string
)

// retrievalCorpus writes a generated knowledge base straight into the
// tables indexing fills (chunks, keywords, builtin vectors, full-text
// entries through the triggers), once per run.
func retrievalCorpus(b *testing.B) (*gorm.DB, string) {
	b.Helper()
	corpusOnce.Do(func() {
		dir, err := os.MkdirTemp("", "appkb-bench-")
		if err != nil {
			b.Fatal(err)
		}
		gdb, err := db.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		hq := knowledge.TechniqueHighQuality
		ds, err := knowledge.NewStore(gdb, nil).CreateDataset(context.Background(), knowledge.Actor{}, knowledge.CreateParams{Name: "bench", IndexingTechnique: &hq})
		if err != nil {
			b.Fatal(err)
		}
		var row models.Dataset
		gdb.Take(&row, "id = ?", ds.ID)
		key := indexing.ModelKey(row.EmbeddingModelProvider, row.EmbeddingModel)
		rng := rand.New(rand.NewSource(1))
		now := time.Now().UTC()
		n := retrievalChunks()
		perDoc := 100
		for d := 0; d*perDoc < n; d++ {
			doc := models.Document{ID: uuid.NewString(), DatasetID: ds.ID, Position: d + 1, Name: fmt.Sprintf("doc%d", d),
				DataSourceType: "text", FileID: uuid.NewString(), FileName: "x.txt", ProcessRule: "{}", DocForm: "text_model",
				DocLanguage: "English", IndexingStatus: "completed", Enabled: true, Batch: "b", DocMetadata: "{}",
				CreatedAt: now, UpdatedAt: now}
			var segs []models.Segment
			var vecs []models.SegmentEmbedding
			for i := 0; i < perDoc && d*perDoc+i < n; i++ {
				words := make([]string, 30)
				for j := range words {
					words[j] = corpusWords[rng.Intn(len(corpusWords))]
				}
				text := strings.Join(words, " ") + "."
				kw, _ := json.Marshal(textsplit.Keywords(text, 10))
				seg := models.Segment{ID: uuid.NewString(), DatasetID: ds.ID, DocumentID: doc.ID, Position: i + 1, Content: text,
					Keywords: string(kw), IndexNodeID: uuid.NewString(), IndexNodeHash: "h", Enabled: true, Status: "completed",
					CreatedAt: now, UpdatedAt: now}
				segs = append(segs, seg)
				v := llm.BuiltinEmbedding(text)
				vecs = append(vecs, models.SegmentEmbedding{NodeID: seg.IndexNodeID, Model: key, DatasetID: ds.ID, SegmentID: seg.ID,
					Dims: len(v), Vector: indexing.EncodeVector(v)})
			}
			err := gdb.Transaction(func(tx *gorm.DB) error {
				if err := tx.Create(&doc).Error; err != nil {
					return err
				}
				if err := tx.CreateInBatches(&segs, 200).Error; err != nil {
					return err
				}
				return tx.CreateInBatches(&vecs, 200).Error
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		corpusDB, corpusID = gdb, ds.ID
	})
	return corpusDB, corpusID
}

// BenchmarkRetrieval measures one search per iteration for each method and
// reports the median latency (p50-ms) and the 99th percentile (p99-ms).
func BenchmarkRetrieval(b *testing.B) {
	gdb, id := retrievalCorpus(b)
	svc := retrieval.New(gdb, nil)
	queries := []string{"refund order shipping parcel", "green tea with lemon and sugar", "bicycle chain oil", "office printer paper network"}
	for _, method := range []string{knowledge.SearchKeyword, knowledge.SearchFullText, knowledge.SearchSemantic, knowledge.SearchHybrid} {
		b.Run(method, func(b *testing.B) {
			rm := knowledge.RetrievalModel{SearchMethod: method, TopK: 4}
			// Warm the vector cache, as a running server would have.
			if _, err := svc.Search(context.Background(), []string{id}, queries[0], rm); err != nil {
				b.Fatal(err)
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
		})
	}
}
