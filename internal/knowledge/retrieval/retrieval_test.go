package retrieval_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/retrieval"
	"appkb/internal/knowledge/textsplit"
	"appkb/internal/llm"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// corpus is a knowledge base with documents indexed one chunk per line.
type corpus struct {
	db    *gorm.DB
	kb    *datasets.Store
	docs  *documents.Service
	actor datasets.Actor
	id    string
	ids   map[string]string // document name → id
}

func newCorpus(t *testing.T, technique string) *corpus {
	t.Helper()
	gdb := db.OpenTemp(t)
	dir := t.TempDir()
	c := &corpus{db: gdb, kb: datasets.NewStore(gdb, nil), docs: documents.NewService(gdb, nil, dir),
		actor: datasets.Actor{KeyID: "test"}, ids: map[string]string{}}
	ds, err := c.kb.CreateDataset(context.Background(), c.actor, datasets.CreateParams{Name: "kb", IndexingTechnique: &technique})
	if err != nil {
		t.Fatal(err)
	}
	c.id = ds.ID
	stop := documents.Start(context.Background(), documents.Config{DB: gdb, DataDir: dir, Poll: 10 * time.Millisecond, Logger: quiet})
	t.Cleanup(stop)
	return c
}

var lines = &textsplit.ProcessRule{Mode: "custom", Rules: &textsplit.Rules{
	Segmentation: &textsplit.Segmentation{Separator: `\n`, MaxTokens: 200}}}

// add indexes a document and waits until it is done.
func (c *corpus) add(t *testing.T, name, text string, rule *textsplit.ProcessRule) string {
	t.Helper()
	ctx := context.Background()
	created, err := c.docs.CreateFromText(ctx, c.actor, c.id, name, text, documents.Settings{ProcessRule: rule})
	if err != nil {
		t.Fatal(err)
	}
	// Generous: under the race detector on two busy cores one document of
	// a large collection has taken over 5 s.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		st, err := c.docs.BatchStatus(ctx, c.actor, c.id, created.Batch)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].IndexingStatus == documents.StatusCompleted {
			c.ids[name] = created.Document.ID
			return created.Document.ID
		}
		if st[0].IndexingStatus == documents.StatusError {
			t.Fatalf("indexing %s failed", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("indexing did not finish")
	return ""
}

func contents(hits []retrieval.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Segment.Content
	}
	return out
}

func ptr[T any](v T) *T { return &v }

const (
	tea    = "Green tea is steamed right after picking."
	coffee = "Espresso is brewed by forcing hot water through coffee."
	cats   = "Cats sleep most of the day and purr when content."
	bikes  = "A bicycle chain needs oil every few hundred kilometres."
)

func TestSearchMethods(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	c.add(t, "drinks", tea+"\n"+coffee, lines)
	c.add(t, "life", cats+"\n"+bikes, lines)
	svc := retrieval.New(c.db, nil)
	ctx := context.Background()

	tests := []struct {
		name  string
		query string
		rm    datasets.RetrievalModel
		want  []string // exact contents, best first
		first string   // or only the best hit
	}{
		{name: "keyword search scores shared keywords", query: "how is espresso coffee brewed",
			rm: datasets.RetrievalModel{SearchMethod: datasets.SearchKeyword, TopK: 3}, want: []string{coffee}},
		{name: "full-text search finds the word", query: "purr?", rm: datasets.RetrievalModel{SearchMethod: datasets.SearchFullText, TopK: 3},
			want: []string{cats}},
		{name: "full-text search ignores FTS syntax in the query", query: `"chain" AND (oil* OR NEAR`,
			rm: datasets.RetrievalModel{SearchMethod: datasets.SearchFullText, TopK: 3}, first: bikes},
		{name: "semantic search ranks the closest chunk first", query: "green tea picking",
			rm: datasets.RetrievalModel{SearchMethod: datasets.SearchSemantic, TopK: 4}, first: tea},
		{name: "top_k bounds the hits", query: "green tea picking",
			rm: datasets.RetrievalModel{SearchMethod: datasets.SearchSemantic, TopK: 2}},
		{name: "hybrid weighted score", query: "bicycle chain oil", rm: datasets.RetrievalModel{SearchMethod: datasets.SearchHybrid, TopK: 1,
			RerankingMode: ptr(datasets.ModeWeightedScore), Weights: &datasets.Weights{VectorSetting: &datasets.VectorSetting{VectorWeight: ptr(0.5)},
				KeywordSetting: &datasets.KeywordSetting{KeywordWeight: ptr(0.5)}}}, want: []string{bikes}},
		{name: "hybrid with the rerank model", query: "cats purr", rm: datasets.RetrievalModel{SearchMethod: datasets.SearchHybrid, TopK: 1,
			RerankingEnable: true, RerankingMode: ptr(datasets.ModeRerankingModel),
			RerankingModel: &datasets.RerankingModel{ProviderName: "builtin", ModelName: "builtin-rerank"}}, want: []string{cats}},
		{name: "score threshold drops weak hits", query: "purr", rm: datasets.RetrievalModel{SearchMethod: datasets.SearchSemantic, TopK: 4,
			ScoreThresholdEnabled: true, ScoreThreshold: ptr(0.99)}, want: []string{}},
		{name: "no keyword in common finds nothing", query: "volcano",
			rm: datasets.RetrievalModel{SearchMethod: datasets.SearchKeyword, TopK: 3}, want: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hits, err := svc.Search(ctx, []string{c.id}, tc.query, tc.rm)
			if err != nil {
				t.Fatal(err)
			}
			got := contents(hits)
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Fatalf("hits %q, want %q", got, tc.want)
			}
			if tc.first != "" && (len(got) == 0 || got[0] != tc.first) {
				t.Fatalf("hits %q, want %q first", got, tc.first)
			}
			if len(got) > tc.rm.TopK {
				t.Fatalf("%d hits for top_k %d", len(got), tc.rm.TopK)
			}
			for i := 1; i < len(hits); i++ {
				if hits[i].Score > hits[i-1].Score {
					t.Fatalf("hits out of order: %v", hits)
				}
			}
			for _, h := range hits {
				if h.DatasetName != "kb" || h.Document.Name == "" {
					t.Fatalf("hit without names: %+v", h)
				}
			}
		})
	}
}

func TestKeywordScoreIsShareOfQueryKeywords(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueEconomy)
	c.add(t, "drinks", tea+"\n"+coffee, lines)
	// Economy knowledge bases use keyword search whatever is asked.
	hits, err := retrieval.New(c.db, nil).Search(context.Background(), []string{c.id}, "espresso volcano",
		datasets.RetrievalModel{SearchMethod: datasets.SearchSemantic, TopK: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Segment.Content != coffee || hits[0].Score != 0.5 {
		t.Fatalf("hits %+v", hits)
	}
}

func TestFiltersAndHitCount(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	ctx := context.Background()
	a := c.add(t, "a", "Tea grows on hills.", lines)
	b := c.add(t, "b", "Tea is dried in the sun.", lines)
	d := c.add(t, "d", "Tea is sold in tins.", lines)
	lang, err := c.kb.CreateMetadataField(ctx, c.actor, c.id, "lang", datasets.MetadataString)
	if err != nil {
		t.Fatal(err)
	}
	year, err := c.kb.CreateMetadataField(ctx, c.actor, c.id, "year", datasets.MetadataNumber)
	if err != nil {
		t.Fatal(err)
	}
	err = c.docs.SetMetadata(ctx, c.actor, c.id, []documents.MetadataOp{
		{DocumentID: a, Values: map[string]any{lang.ID: "english", year.ID: 2020.0}},
		{DocumentID: b, Values: map[string]any{lang.ID: "german", year.ID: 2024.0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := retrieval.New(c.db, nil)
	names := func(hits []retrieval.Hit) string {
		var out []string
		for _, h := range hits {
			out = append(out, h.Document.Name)
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	cond := func(name, op string, v any) datasets.MetadataCondition {
		return datasets.MetadataCondition{Name: name, ComparisonOperator: op, Value: v}
	}
	tests := []struct {
		name   string
		filter datasets.MetadataFilter
		want   string
	}{
		{"is", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("lang", "is", "german")}}, "b"},
		{"is not includes documents without a value", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("lang", "is not", "german")}}, "a,d"},
		{"contains", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("lang", "contains", "gli")}}, "a"},
		{"start with", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("lang", "start with", "ger")}}, "b"},
		{"empty", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("lang", "empty", nil)}}, "d"},
		{"not empty", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("year", "not empty", nil)}}, "a,b"},
		{"in", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("lang", "in", []any{"german", "french"})}}, "b"},
		{"greater than", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("year", ">", 2021.0)}}, "b"},
		{"less or equal", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("year", "≤", 2020.0)}}, "a"},
		{"and of two", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("year", "≥", 2020.0), cond("lang", "is", "english")}}, "a"},
		{"or of two", datasets.MetadataFilter{LogicalOperator: ptr("or"),
			Conditions: []datasets.MetadataCondition{cond("lang", "is", "german"), cond("lang", "empty", nil)}}, "b,d"},
		{"built-in document name", datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{cond("document_name", "is", "d")}}, "d"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hits, err := svc.Search(ctx, []string{c.id}, "tea", datasets.RetrievalModel{SearchMethod: datasets.SearchFullText, TopK: 10,
				MetadataFilteringConditions: &tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			if got := names(hits); got != tc.want {
				t.Fatalf("documents %q, want %q", got, tc.want)
			}
		})
	}

	// A disabled document is never returned; hit_count counts each return.
	if err := c.docs.SetStatus(ctx, c.actor, c.id, "disable", []string{d}); err != nil {
		t.Fatal(err)
	}
	hits, err := svc.Search(ctx, []string{c.id}, "tea", datasets.RetrievalModel{SearchMethod: datasets.SearchSemantic, TopK: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(hits); got != "a,b" {
		t.Fatalf("documents %q after disabling d", got)
	}
	// Without a filter, hits still show their documents' metadata by name.
	wantMeta := map[string]string{"a": "map[lang:english year:2020]", "b": "map[lang:german year:2024]"}
	for _, h := range hits {
		if got := fmt.Sprint(h.Document.Metadata); got != wantMeta[h.Document.Name] {
			t.Fatalf("document %s metadata %s, want %s", h.Document.Name, got, wantMeta[h.Document.Name])
		}
	}
	// Each hit reports the stored count, which includes this hit.
	for _, h := range hits {
		var n int
		c.db.Raw(`SELECT hit_count FROM segments WHERE id = ?`, h.Segment.ID).Scan(&n)
		if n != h.Segment.HitCount || n < 1 {
			t.Fatalf("hit_count stored %d, reported %d", n, h.Segment.HitCount)
		}
	}
	before := hits[0].Segment.HitCount
	again, _ := svc.Search(ctx, []string{c.id}, "tea", datasets.RetrievalModel{SearchMethod: datasets.SearchSemantic, TopK: 10})
	for _, h := range again {
		if h.Segment.ID == hits[0].Segment.ID && h.Segment.HitCount != before+1 {
			t.Fatalf("hit_count %d after %d", h.Segment.HitCount, before)
		}
	}
}

func TestHierarchicalReturnsParentWithChildren(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	rule := &textsplit.ProcessRule{Mode: "hierarchical", Rules: &textsplit.Rules{ParentMode: "paragraph"}}
	c.add(t, "pets", "Cats purr softly.\nDogs bark loudly.\n\nFish swim in tanks.\nBirds sing at dawn.", rule)
	svc := retrieval.New(c.db, nil)
	for _, method := range []string{datasets.SearchSemantic, datasets.SearchFullText, datasets.SearchKeyword, datasets.SearchHybrid} {
		t.Run(method, func(t *testing.T) {
			hits, err := svc.Search(context.Background(), []string{c.id}, "dogs bark", datasets.RetrievalModel{SearchMethod: method, TopK: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != 1 || !strings.Contains(hits[0].Segment.Content, "Cats purr softly.") {
				t.Fatalf("hits %q", contents(hits))
			}
			ch := hits[0].ChildChunks
			if len(ch) != 1 || ch[0].Content != "Dogs bark loudly." || ch[0].Position == 0 {
				t.Fatalf("child chunks %+v", ch)
			}
		})
	}
}

func TestVectorCacheFollowsChanges(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	svc := retrieval.New(c.db, nil)
	rm := datasets.RetrievalModel{SearchMethod: datasets.SearchSemantic, TopK: 5}
	c.add(t, "one", tea, lines)
	if hits, _ := svc.Search(context.Background(), []string{c.id}, "espresso coffee", rm); len(hits) != 1 {
		t.Fatalf("hits %q", contents(hits))
	}
	c.add(t, "two", coffee, lines)
	hits, _ := svc.Search(context.Background(), []string{c.id}, "espresso coffee", rm)
	if len(hits) != 2 || hits[0].Segment.Content != coffee {
		t.Fatalf("hits %q after adding a document", contents(hits))
	}

	// The newest vector's row is deleted and the same text indexed again:
	// on SQLite the new row takes the same rowid and the same vector bytes,
	// with the same count; only the chunk differs.
	if err := c.docs.DeleteDocument(context.Background(), c.actor, c.id, c.ids["two"]); err != nil {
		t.Fatal(err)
	}
	three := c.add(t, "three", coffee, lines)
	hits, err := svc.Search(context.Background(), []string{c.id}, "espresso coffee", rm)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 || hits[0].Document.ID != three {
		t.Fatalf("hits %q after replacing a document, want the first from document three", contents(hits))
	}

	// A change in another knowledge base leaves this one's cache valid,
	// and a change here is still seen afterwards.
	other := newCorpusOn(t, c.db, c.docs, datasets.TechniqueHighQuality)
	other.add(t, "elsewhere", cats, lines)
	if hits, _ := svc.Search(context.Background(), []string{c.id}, "espresso coffee", rm); len(hits) != 2 {
		t.Fatalf("hits %q after a change elsewhere", contents(hits))
	}
	c.add(t, "four", bikes, lines)
	if hits, _ := svc.Search(context.Background(), []string{c.id}, "bicycle chain oil", rm); len(hits) != 3 || hits[0].Segment.Content != bikes {
		t.Fatalf("hits %q after adding a third document", contents(hits))
	}
}

// newCorpusOn is a second knowledge base in the database of another
// corpus, indexed by its workers.
func newCorpusOn(t *testing.T, gdb *gorm.DB, docs *documents.Service, technique string) *corpus {
	t.Helper()
	c := &corpus{db: gdb, kb: datasets.NewStore(gdb, nil), docs: docs, actor: datasets.Actor{KeyID: "test"}, ids: map[string]string{}}
	ds, err := c.kb.CreateDataset(context.Background(), c.actor, datasets.CreateParams{Name: "kb2", IndexingTechnique: &technique})
	if err != nil {
		t.Fatal(err)
	}
	c.id = ds.ID
	return c
}

// TestHybridIsFusionOfItsParts checks that a hybrid search (whose two
// candidate searches run concurrently) returns exactly the weighted sum of
// the scores of a semantic and a full-text search run on their own: with
// top_k above the corpus size each single search returns its whole
// candidate list, best first.
func TestHybridIsFusionOfItsParts(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	c.add(t, "drinks", tea+"\n"+coffee+"\nBlack tea is left to oxidise before it is dried.\nCold brew coffee steeps for a day.", lines)
	c.add(t, "life", cats+"\n"+bikes+"\nA bicycle bell warns walkers.\nCats and dogs drink water.", lines)
	svc := retrieval.New(c.db, nil)
	ctx := context.Background()
	const topK = 50
	tests := []struct {
		query  string
		vw, kw float64
	}{
		{"green tea", 0.7, 0.3},
		{"bicycle chain oil", 0.5, 0.5},
		{"coffee water cats", 0.3, 0.7},
		{"espresso", 1, 0},
		{"volcano", 0.6, 0.4},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			search := func(rm datasets.RetrievalModel) []retrieval.Hit {
				rm.TopK = topK
				hits, err := svc.Search(ctx, []string{c.id}, tc.query, rm)
				if err != nil {
					t.Fatal(err)
				}
				return hits
			}
			sem := search(datasets.RetrievalModel{SearchMethod: datasets.SearchSemantic})
			ft := search(datasets.RetrievalModel{SearchMethod: datasets.SearchFullText})
			hybrid := search(datasets.RetrievalModel{SearchMethod: datasets.SearchHybrid,
				RerankingMode: ptr(datasets.ModeWeightedScore), Weights: &datasets.Weights{
					VectorSetting:  &datasets.VectorSetting{VectorWeight: ptr(tc.vw)},
					KeywordSetting: &datasets.KeywordSetting{KeywordWeight: ptr(tc.kw)}}})
			if len(sem) == 0 {
				t.Fatal("semantic search found nothing")
			}

			// The fusion, written out: (vector weight × scaled cosine +
			// keyword weight × scaled full-text score) / (sum of the weights), a chunk
			// missing on the semantic side taking its lowest cosine, one
			// missing on the full-text side 0; ties keep the order of first
			// appearance (semantic list, then full-text only).
			type fused struct {
				id    string
				score float64
			}
			// Each side is first scaled so that its best scores 1: cosines
			// divided by the best, full-text scores turned back into BM25
			// strengths and divided by the best strength.
			var want []fused
			at := map[string]int{}
			top := sem[0].Score
			floor := max(sem[len(sem)-1].Score/top, 0)
			for _, h := range sem {
				at[h.Segment.ID] = len(want)
				want = append(want, fused{id: h.Segment.ID, score: tc.vw * max(h.Score/top, 0)})
			}
			strength := func(s float64) float64 { return s / (1 - s) }
			best := 0.0
			for _, h := range ft {
				best = max(best, strength(h.Score))
			}
			for _, h := range ft {
				h.Score = strength(h.Score) / best
				i, ok := at[h.Segment.ID]
				if !ok {
					i = len(want)
					at[h.Segment.ID] = i
					want = append(want, fused{id: h.Segment.ID, score: tc.vw * floor})
				}
				want[i].score += tc.kw * h.Score
			}
			for i := range want {
				want[i].score /= tc.vw + tc.kw
			}
			sort.SliceStable(want, func(i, j int) bool { return want[i].score > want[j].score })

			if len(hybrid) != len(want) {
				t.Fatalf("hybrid found %d chunks, the fusion of its parts %d", len(hybrid), len(want))
			}
			for i, h := range hybrid {
				if h.Segment.ID != want[i].id || math.Abs(h.Score-want[i].score) > 1e-12 {
					t.Fatalf("hit %d: %s %.15f, want %s %.15f", i, h.Segment.ID, h.Score, want[i].id, want[i].score)
				}
			}
		})
	}
}

// TestHybridFailsWhenEitherPartFails breaks one side of a hybrid search at
// a time (the embedding model, then the full-text index) and expects the
// error back, as the single-method search of that side returns it.
func TestHybridFailsWhenEitherPartFails(t *testing.T) {
	// Only the builtin provider, and no fallback for other names.
	strict, err := llm.Parse(nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		method string // the single method that fails the same way
		// breaks damages the corpus or returns the models to search with.
		breaks func(t *testing.T, c *corpus) *llm.Registry
	}{
		{"embedding provider not configured", datasets.SearchSemantic, func(t *testing.T, c *corpus) *llm.Registry {
			if err := c.db.Exec(`UPDATE datasets SET embedding_model_provider = 'no-such-provider' WHERE id = ?`, c.id).Error; err != nil {
				t.Fatal(err)
			}
			return strict
		}},
		// Both full-text paths: the engine's index, and the counter that
		// tells whether the in-memory ranking index may answer.
		{"full-text index gone", datasets.SearchFullText, func(t *testing.T, c *corpus) *llm.Registry {
			stmt := `DROP TABLE segments_fts`
			if db.IsPostgres(c.db) {
				stmt = `ALTER TABLE segments RENAME COLUMN tsv TO tsv_gone`
			}
			for _, stmt := range []string{stmt, `DROP TABLE chunk_text_versions`} {
				if err := c.db.Exec(stmt).Error; err != nil {
					t.Fatal(err)
				}
			}
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCorpus(t, datasets.TechniqueHighQuality)
			c.add(t, "drinks", tea+"\n"+coffee, lines)
			hybrid := datasets.RetrievalModel{SearchMethod: datasets.SearchHybrid, TopK: 3}
			if _, err := retrieval.New(c.db, nil).Search(context.Background(), []string{c.id}, "green tea", hybrid); err != nil {
				t.Fatalf("before breaking anything: %v", err)
			}
			svc := retrieval.New(c.db, tc.breaks(t, c))
			if _, err := svc.Search(context.Background(), []string{c.id}, "green tea",
				datasets.RetrievalModel{SearchMethod: tc.method, TopK: 3}); err == nil {
				t.Fatalf("%s search did not fail", tc.method)
			}
			hits, err := svc.Search(context.Background(), []string{c.id}, "green tea", hybrid)
			if err == nil {
				t.Fatalf("hybrid search did not fail: %q", contents(hits))
			}
		})
	}
}

// TestHybridHonoursCancellation: a search whose context is already over
// fails instead of returning hits.
func TestHybridHonoursCancellation(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	c.add(t, "drinks", tea+"\n"+coffee, lines)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := retrieval.New(c.db, nil).Search(ctx, []string{c.id}, "green tea",
		datasets.RetrievalModel{SearchMethod: datasets.SearchHybrid, TopK: 3})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}
