package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"appkb/internal/apps/apikeys"
	"appkb/internal/knowledge/datasets"
)

// BenchmarkRetrieveHTTP sends POST /v1/datasets/{id}/retrieve (top_k 4)
// through the real router with a knowledge key, one request at a time,
// over the generated corpus of BenchmarkRetrieval (APPKB_BENCH_CHUNKS
// chunks, default 5,000) in two shapes: documents of 100 chunks, and one
// chunk per document as the load tool's -kb-docs writes them. It reports
// the median (p50-ms) and 99th percentile (p99-ms) of the whole request.
func BenchmarkRetrieveHTTP(b *testing.B) {
	queries := benchQueries()
	for _, shape := range []struct {
		name   string
		perDoc int
	}{{"docs100", 100}, {"docs1", 1}} {
		b.Run(shape.name, func(b *testing.B) {
			c := generatedCorpus(b, shape.perDoc)
			b.Logf("corpus: %d chunks, %d per document, built in %s", retrievalChunks(), shape.perDoc, c.build.Round(time.Millisecond))
			key, err := apikeys.NewStore(c.db).CreateKnowledgeKey(context.Background(), nil, "bench")
			if err != nil {
				b.Fatal(err)
			}
			e := router(b, c.db)
			path := "/v1/datasets/" + c.id + "/retrieve"
			send := func(b *testing.B, method, query string) {
				body := fmt.Sprintf(`{"query":%q,"retrieval_model":{"search_method":%q,"reranking_enable":false,"top_k":4,"score_threshold_enabled":false}}`, query, method)
				req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				e.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
				if !strings.Contains(rec.Body.String(), `"segment"`) {
					b.Fatalf("no records: %s", rec.Body)
				}
			}
			for _, method := range []string{datasets.SearchFullText, datasets.SearchSemantic, datasets.SearchHybrid} {
				b.Run(method, func(b *testing.B) {
					// Warm the caches as a running server would have them,
					// and wait for the approximate vector index.
					send(b, method, queries[0])
					if method != datasets.SearchFullText {
						waitIndex(b, c.db, c.id)
					}
					lat := make([]time.Duration, 0, b.N)
					i := 0
					for b.Loop() {
						start := time.Now()
						send(b, method, queries[i%len(queries)])
						lat = append(lat, time.Since(start))
						i++
					}
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				})
			}
		})
	}
}
