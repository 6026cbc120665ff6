package retrieval_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	"appkb/knowledge"
	"appkb/retrieval"
)

// evalSet is testdata/eval.json: passages, queries and graded judgments.
type evalSet struct {
	Docs []struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	} `json:"docs"`
	Queries []struct {
		Q   string         `json:"q"`
		Rel map[string]int `json:"rel"`
	} `json:"queries"`
}

// ndcg10 is the normalised discounted cumulative gain of the first ten
// results (gain 2^rel - 1, log2 discount).
func ndcg10(ranked []string, rel map[string]int) float64 {
	dcg := 0.0
	for i, id := range ranked {
		if i == 10 {
			break
		}
		dcg += (math.Pow(2, float64(rel[id])) - 1) / math.Log2(float64(i+2))
	}
	var ideal []int
	for _, r := range rel {
		ideal = append(ideal, r)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(ideal)))
	idcg := 0.0
	for i, r := range ideal {
		if i == 10 {
			break
		}
		idcg += (math.Pow(2, float64(r)) - 1) / math.Log2(float64(i+2))
	}
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}

// TestRetrievalQuality runs the evaluation collection with every search
// method on a high_quality knowledge base (builtin embeddings) and checks
// the mean nDCG@10 of each against a floor: hybrid search must beat the
// side its weights favour, and the better side when the weights favour
// that one; the builtin reranker must not lower quality beyond a slack.
func TestRetrievalQuality(t *testing.T) {
	raw, err := os.ReadFile("testdata/eval.json")
	if err != nil {
		t.Fatal(err)
	}
	var set evalSet
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	c := newCorpus(t, knowledge.TechniqueHighQuality)
	texts := make([]string, len(set.Docs))
	byText := map[string]string{}
	for i, d := range set.Docs {
		texts[i] = d.Text
		byText[d.Text] = d.ID
	}
	c.add(t, "eval", strings.Join(texts, "\n"), lines)
	svc := retrieval.New(c.db, nil)

	run := func(rm knowledge.RetrievalModel) float64 {
		rm.TopK = 10
		total := 0.0
		for _, q := range set.Queries {
			hits, err := svc.Search(context.Background(), []string{c.id}, q.Q, rm)
			if err != nil {
				t.Fatal(err)
			}
			ranked := make([]string, 0, len(hits))
			for _, h := range hits {
				ranked = append(ranked, byText[h.Segment.Content])
			}
			total += ndcg10(ranked, q.Rel)
		}
		return total / float64(len(set.Queries))
	}
	w := func(vector, keyword float64) *knowledge.Weights {
		return &knowledge.Weights{VectorSetting: &knowledge.VectorSetting{VectorWeight: &vector},
			KeywordSetting: &knowledge.KeywordSetting{KeywordWeight: &keyword}}
	}
	builtinRerank := &knowledge.RerankingModel{ProviderName: "appkb", ModelName: "builtin"}

	fullText := run(knowledge.RetrievalModel{SearchMethod: knowledge.SearchFullText})
	semantic := run(knowledge.RetrievalModel{SearchMethod: knowledge.SearchSemantic})
	hybrid := run(knowledge.RetrievalModel{SearchMethod: knowledge.SearchHybrid})
	better := max(fullText, semantic)
	// The builtin reranker may move a chunk by a place or two; it must not
	// cost more than this much nDCG.
	const rerankSlack = 0.01
	tests := []struct {
		name  string
		rm    knowledge.RetrievalModel
		floor float64
	}{
		{"full_text_search", knowledge.RetrievalModel{SearchMethod: knowledge.SearchFullText}, 0.88},
		{"semantic_search", knowledge.RetrievalModel{SearchMethod: knowledge.SearchSemantic}, 0.80},
		// Weights that lean towards the stronger side give a fusion at
		// least as good as that side.
		{"hybrid_search 0.3/0.7", knowledge.RetrievalModel{SearchMethod: knowledge.SearchHybrid, Weights: w(0.3, 0.7)}, better},
		// Weights that lean towards the weaker side still beat it.
		{"hybrid_search default 0.7/0.3", knowledge.RetrievalModel{SearchMethod: knowledge.SearchHybrid}, semantic},
		{"hybrid_search 0.5/0.5", knowledge.RetrievalModel{SearchMethod: knowledge.SearchHybrid, Weights: w(0.5, 0.5)}, semantic},
		{"hybrid_search with builtin rerank", knowledge.RetrievalModel{SearchMethod: knowledge.SearchHybrid,
			RerankingEnable: true, RerankingModel: builtinRerank}, hybrid - rerankSlack},
		{"full_text_search with builtin rerank", knowledge.RetrievalModel{SearchMethod: knowledge.SearchFullText,
			RerankingEnable: true, RerankingModel: builtinRerank}, fullText - rerankSlack},
	}
	for _, tt := range tests {
		got := run(tt.rm)
		t.Logf("%-38s nDCG@10 %.4f (floor %.4f)", tt.name, got, tt.floor)
		if got < tt.floor-1e-9 {
			t.Errorf("%s: nDCG@10 %.4f is below %.4f", tt.name, got, tt.floor)
		}
	}
}

// TestUsableDocumentsFollowChanges searches twice with one Service (the
// second time from its cache of usable documents) and expects a document
// disabled, archived or deleted in between to be gone from the results.
func TestUsableDocumentsFollowChanges(t *testing.T) {
	tests := []struct{ name, change string }{
		{"disabled", `UPDATE documents SET enabled = FALSE WHERE name = 'a'`},
		{"archived", `UPDATE documents SET archived = TRUE WHERE name = 'a'`},
		{"deleted", `DELETE FROM documents WHERE name = 'a'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCorpus(t, knowledge.TechniqueHighQuality)
			c.add(t, "a", "walrus colonies rest on arctic ice", lines)
			c.add(t, "b", "penguin colonies nest on antarctic ice", lines)
			svc := retrieval.New(c.db, nil)
			// Semantic search relies on the cached set alone to skip documents.
			rm := knowledge.RetrievalModel{SearchMethod: knowledge.SearchSemantic, TopK: 2}
			for round := range 2 {
				hits, err := svc.Search(context.Background(), []string{c.id}, "colonies ice", rm)
				if err != nil {
					t.Fatal(err)
				}
				if round == 0 {
					if len(hits) != 2 {
						t.Fatalf("before: %d hits", len(hits))
					}
					if err := c.db.Exec(tt.change).Error; err != nil {
						t.Fatal(err)
					}
					continue
				}
				if len(hits) != 1 || !strings.Contains(hits[0].Segment.Content, "penguin") {
					t.Fatalf("after: %v", contents(hits))
				}
			}
		})
	}
}
