package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/models"
)

// loaderDocs is how many documents BenchmarkCorpusLoader indexes;
// APPKB_BENCH_DOCS overrides it.
func loaderDocs() int {
	if n, err := strconv.Atoi(os.Getenv("APPKB_BENCH_DOCS")); err == nil && n > 0 {
		return n
	}
	return 100
}

// loaderParas is how many paragraphs each document has (40, about 2,000
// words); APPKB_BENCH_PARAS=1 gives short documents of one chunk each.
func loaderParas() int {
	if n, err := strconv.Atoi(os.Getenv("APPKB_BENCH_PARAS")); err == nil && n > 0 {
		return n
	}
	return 40
}

// BenchmarkCorpusLoader indexes generated text documents the way the API
// does: each is created through documents.Service (which queues it) and
// the indexing workers split, embed with the builtin model and store it.
// One iteration loads the whole corpus into a new knowledge base; it
// reports documents/s and chunks/s, from the first create to the last
// completed document. Run it with -benchtime 1x.
func BenchmarkCorpusLoader(b *testing.B) {
	ctx := context.Background()
	gdb, err := db.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	dataDir := b.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	stop := documents.Start(ctx, documents.Config{DB: gdb, DataDir: dataDir, Poll: 20 * time.Millisecond, Logger: quiet})
	defer stop()
	svc := documents.NewService(gdb, nil, dataDir)
	store := datasets.NewStore(gdb, nil)
	gen := newTextGen(3, vocabSize)
	nDocs := loaderDocs()
	// Documents of 40 paragraphs of two sentences each (about 2,000 words),
	// generated before the clock starts.
	texts := make([]string, nDocs)
	for i := range texts {
		paras := make([]string, loaderParas())
		for p := range paras {
			paras[p] = gen.sentence(15+gen.rng.Intn(20)) + " " + gen.sentence(10+gen.rng.Intn(15))
		}
		texts[i] = strings.Join(paras, "\n\n")
	}
	var docs, chunks int64
	var elapsed, tail time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		hq := datasets.TechniqueHighQuality
		ds, err := store.CreateDataset(ctx, datasets.Actor{}, datasets.CreateParams{Name: fmt.Sprintf("loader%d", it), IndexingTechnique: &hq})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i, text := range texts {
			if _, err := svc.CreateFromText(ctx, datasets.Actor{}, ds.ID, fmt.Sprintf("doc%d", i), text, documents.Settings{}); err != nil {
				b.Fatal(err)
			}
		}
		uploaded := time.Now()
		for {
			var pending, failed int64
			gdb.Model(&models.Document{}).Where("dataset_id = ? AND indexing_status NOT IN ('completed', 'error')", ds.ID).Count(&pending)
			if pending == 0 {
				gdb.Model(&models.Document{}).Where("dataset_id = ? AND indexing_status = 'error'", ds.ID).Count(&failed)
				if failed > 0 {
					b.Fatalf("%d documents failed to index", failed)
				}
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		elapsed += time.Since(start)
		tail += time.Since(uploaded)
		var n int64
		gdb.Model(&models.Segment{}).Where("dataset_id = ?", ds.ID).Count(&n)
		chunks += n
		docs += int64(len(texts))
	}
	b.StopTimer()
	b.ReportMetric(float64(docs)/elapsed.Seconds(), "docs/s")
	b.ReportMetric(float64(chunks)/elapsed.Seconds(), "chunks/s")
	b.ReportMetric(float64(chunks)/float64(docs), "chunks/doc")
	b.ReportMetric(tail.Seconds()/float64(b.N), "s-after-last-upload")
}
