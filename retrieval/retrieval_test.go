package retrieval_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/indexing"
	"appkb/knowledge"
	"appkb/retrieval"
	"appkb/textsplit"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// corpus is a knowledge base with documents indexed one chunk per line.
type corpus struct {
	db    *gorm.DB
	kb    *knowledge.Store
	docs  *indexing.Service
	actor knowledge.Actor
	id    string
	ids   map[string]string // document name → id
}

func newCorpus(t *testing.T, technique string) *corpus {
	t.Helper()
	gdb := db.OpenTemp(t)
	dir := t.TempDir()
	c := &corpus{db: gdb, kb: knowledge.NewStore(gdb, nil), docs: indexing.NewService(gdb, nil, dir),
		actor: knowledge.Actor{KeyID: "test"}, ids: map[string]string{}}
	ds, err := c.kb.CreateDataset(context.Background(), c.actor, knowledge.CreateParams{Name: "kb", IndexingTechnique: &technique})
	if err != nil {
		t.Fatal(err)
	}
	c.id = ds.ID
	stop := indexing.Start(context.Background(), indexing.Config{DB: gdb, DataDir: dir, Poll: 10 * time.Millisecond, Logger: quiet})
	t.Cleanup(stop)
	return c
}

var lines = &textsplit.ProcessRule{Mode: "custom", Rules: &textsplit.Rules{
	Segmentation: &textsplit.Segmentation{Separator: `\n`, MaxTokens: 200}}}

// add indexes a document and waits until it is done.
func (c *corpus) add(t *testing.T, name, text string, rule *textsplit.ProcessRule) string {
	t.Helper()
	ctx := context.Background()
	created, err := c.docs.CreateFromText(ctx, c.actor, c.id, name, text, indexing.Settings{ProcessRule: rule})
	if err != nil {
		t.Fatal(err)
	}
	for range 500 {
		st, err := c.docs.BatchStatus(ctx, c.actor, c.id, created.Batch)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].IndexingStatus == indexing.StatusCompleted {
			c.ids[name] = created.Document.ID
			return created.Document.ID
		}
		if st[0].IndexingStatus == indexing.StatusError {
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
	c := newCorpus(t, knowledge.TechniqueHighQuality)
	c.add(t, "drinks", tea+"\n"+coffee, lines)
	c.add(t, "life", cats+"\n"+bikes, lines)
	svc := retrieval.New(c.db, nil)
	ctx := context.Background()

	tests := []struct {
		name  string
		query string
		rm    knowledge.RetrievalModel
		want  []string // exact contents, best first
		first string   // or only the best hit
	}{
		{name: "keyword search scores shared keywords", query: "how is espresso coffee brewed",
			rm: knowledge.RetrievalModel{SearchMethod: knowledge.SearchKeyword, TopK: 3}, want: []string{coffee}},
		{name: "full-text search finds the word", query: "purr?", rm: knowledge.RetrievalModel{SearchMethod: knowledge.SearchFullText, TopK: 3},
			want: []string{cats}},
		{name: "full-text search ignores FTS syntax in the query", query: `"chain" AND (oil* OR NEAR`,
			rm: knowledge.RetrievalModel{SearchMethod: knowledge.SearchFullText, TopK: 3}, first: bikes},
		{name: "semantic search ranks the closest chunk first", query: "green tea picking",
			rm: knowledge.RetrievalModel{SearchMethod: knowledge.SearchSemantic, TopK: 4}, first: tea},
		{name: "top_k bounds the hits", query: "green tea picking",
			rm: knowledge.RetrievalModel{SearchMethod: knowledge.SearchSemantic, TopK: 2}},
		{name: "hybrid weighted score", query: "bicycle chain oil", rm: knowledge.RetrievalModel{SearchMethod: knowledge.SearchHybrid, TopK: 1,
			RerankingMode: ptr(knowledge.ModeWeightedScore), Weights: &knowledge.Weights{VectorSetting: &knowledge.VectorSetting{VectorWeight: ptr(0.5)},
				KeywordSetting: &knowledge.KeywordSetting{KeywordWeight: ptr(0.5)}}}, want: []string{bikes}},
		{name: "hybrid with the rerank model", query: "cats purr", rm: knowledge.RetrievalModel{SearchMethod: knowledge.SearchHybrid, TopK: 1,
			RerankingEnable: true, RerankingMode: ptr(knowledge.ModeRerankingModel),
			RerankingModel: &knowledge.RerankingModel{ProviderName: "builtin", ModelName: "builtin-rerank"}}, want: []string{cats}},
		{name: "score threshold drops weak hits", query: "purr", rm: knowledge.RetrievalModel{SearchMethod: knowledge.SearchSemantic, TopK: 4,
			ScoreThresholdEnabled: true, ScoreThreshold: ptr(0.99)}, want: []string{}},
		{name: "no keyword in common finds nothing", query: "volcano",
			rm: knowledge.RetrievalModel{SearchMethod: knowledge.SearchKeyword, TopK: 3}, want: []string{}},
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
	c := newCorpus(t, knowledge.TechniqueEconomy)
	c.add(t, "drinks", tea+"\n"+coffee, lines)
	// Economy knowledge bases use keyword search whatever is asked.
	hits, err := retrieval.New(c.db, nil).Search(context.Background(), []string{c.id}, "espresso volcano",
		knowledge.RetrievalModel{SearchMethod: knowledge.SearchSemantic, TopK: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Segment.Content != coffee || hits[0].Score != 0.5 {
		t.Fatalf("hits %+v", hits)
	}
}

func TestFiltersAndHitCount(t *testing.T) {
	c := newCorpus(t, knowledge.TechniqueHighQuality)
	ctx := context.Background()
	a := c.add(t, "a", "Tea grows on hills.", lines)
	b := c.add(t, "b", "Tea is dried in the sun.", lines)
	d := c.add(t, "d", "Tea is sold in tins.", lines)
	lang, err := c.kb.CreateMetadataField(ctx, c.actor, c.id, "lang", knowledge.MetadataString)
	if err != nil {
		t.Fatal(err)
	}
	year, err := c.kb.CreateMetadataField(ctx, c.actor, c.id, "year", knowledge.MetadataNumber)
	if err != nil {
		t.Fatal(err)
	}
	err = c.docs.SetMetadata(ctx, c.actor, c.id, []indexing.MetadataOp{
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
	cond := func(name, op string, v any) knowledge.MetadataCondition {
		return knowledge.MetadataCondition{Name: name, ComparisonOperator: op, Value: v}
	}
	tests := []struct {
		name   string
		filter knowledge.MetadataFilter
		want   string
	}{
		{"is", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("lang", "is", "german")}}, "b"},
		{"is not includes documents without a value", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("lang", "is not", "german")}}, "a,d"},
		{"contains", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("lang", "contains", "gli")}}, "a"},
		{"start with", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("lang", "start with", "ger")}}, "b"},
		{"empty", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("lang", "empty", nil)}}, "d"},
		{"not empty", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("year", "not empty", nil)}}, "a,b"},
		{"in", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("lang", "in", []any{"german", "french"})}}, "b"},
		{"greater than", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("year", ">", 2021.0)}}, "b"},
		{"less or equal", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("year", "≤", 2020.0)}}, "a"},
		{"and of two", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("year", "≥", 2020.0), cond("lang", "is", "english")}}, "a"},
		{"or of two", knowledge.MetadataFilter{LogicalOperator: ptr("or"),
			Conditions: []knowledge.MetadataCondition{cond("lang", "is", "german"), cond("lang", "empty", nil)}}, "b,d"},
		{"built-in document name", knowledge.MetadataFilter{Conditions: []knowledge.MetadataCondition{cond("document_name", "is", "d")}}, "d"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hits, err := svc.Search(ctx, []string{c.id}, "tea", knowledge.RetrievalModel{SearchMethod: knowledge.SearchFullText, TopK: 10,
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
	hits, err := svc.Search(ctx, []string{c.id}, "tea", knowledge.RetrievalModel{SearchMethod: knowledge.SearchSemantic, TopK: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(hits); got != "a,b" {
		t.Fatalf("documents %q after disabling d", got)
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
	again, _ := svc.Search(ctx, []string{c.id}, "tea", knowledge.RetrievalModel{SearchMethod: knowledge.SearchSemantic, TopK: 10})
	for _, h := range again {
		if h.Segment.ID == hits[0].Segment.ID && h.Segment.HitCount != before+1 {
			t.Fatalf("hit_count %d after %d", h.Segment.HitCount, before)
		}
	}
}

func TestHierarchicalReturnsParentWithChildren(t *testing.T) {
	c := newCorpus(t, knowledge.TechniqueHighQuality)
	rule := &textsplit.ProcessRule{Mode: "hierarchical", Rules: &textsplit.Rules{ParentMode: "paragraph"}}
	c.add(t, "pets", "Cats purr softly.\nDogs bark loudly.\n\nFish swim in tanks.\nBirds sing at dawn.", rule)
	svc := retrieval.New(c.db, nil)
	for _, method := range []string{knowledge.SearchSemantic, knowledge.SearchFullText, knowledge.SearchKeyword, knowledge.SearchHybrid} {
		t.Run(method, func(t *testing.T) {
			hits, err := svc.Search(context.Background(), []string{c.id}, "dogs bark", knowledge.RetrievalModel{SearchMethod: method, TopK: 1})
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
	c := newCorpus(t, knowledge.TechniqueHighQuality)
	svc := retrieval.New(c.db, nil)
	rm := knowledge.RetrievalModel{SearchMethod: knowledge.SearchSemantic, TopK: 5}
	c.add(t, "one", tea, lines)
	if hits, _ := svc.Search(context.Background(), []string{c.id}, "espresso coffee", rm); len(hits) != 1 {
		t.Fatalf("hits %q", contents(hits))
	}
	c.add(t, "two", coffee, lines)
	hits, _ := svc.Search(context.Background(), []string{c.id}, "espresso coffee", rm)
	if len(hits) != 2 || hits[0].Segment.Content != coffee {
		t.Fatalf("hits %q after adding a document", contents(hits))
	}
}
