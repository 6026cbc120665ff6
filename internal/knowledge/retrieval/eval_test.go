package retrieval_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/retrieval"
	"appkb/internal/llm"
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

// firstHalf is how many queries of testdata/eval.json came with its first
// version (36 passages); the rest came with the passages added after. The
// figures of each half are logged to see whether a conclusion holds on
// both.
const firstHalf = 32

// TestRetrievalQuality runs the evaluation collection with every search
// method, on a high_quality knowledge base of each builtin embedding model,
// and checks the mean nDCG@10 of each against a floor. With the current
// model, hybrid search must be at least as good as the better of its two
// parts, at Dify's default weights and others, and the builtin reranker
// must not lower the quality of any method. Knowledge bases made with the
// first builtin embedding ("builtin") are checked with the floors that
// they meet.
func TestRetrievalQuality(t *testing.T) {
	raw, err := os.ReadFile("testdata/eval.json")
	if err != nil {
		t.Fatal(err)
	}
	var set evalSet
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Queries) <= firstHalf {
		t.Fatalf("%d queries", len(set.Queries))
	}
	w := func(vector, keyword float64) *datasets.Weights {
		return &datasets.Weights{VectorSetting: &datasets.VectorSetting{VectorWeight: &vector},
			KeywordSetting: &datasets.KeywordSetting{KeywordWeight: &keyword}}
	}
	builtinRerank := &datasets.RerankingModel{ProviderName: "appkb", ModelName: "builtin"}
	method := func(m string, vw, kw float64, rerank bool) datasets.RetrievalModel {
		rm := datasets.RetrievalModel{SearchMethod: m}
		if vw+kw > 0 {
			rm.Weights = w(vw, kw)
		}
		if rerank {
			rm.RerankingEnable, rm.RerankingModel = true, builtinRerank
		}
		return rm
	}
	const (
		ft  = datasets.SearchFullText
		sem = datasets.SearchSemantic
		hyb = datasets.SearchHybrid
	)

	for _, model := range []string{llm.BuiltinEmbeddingModel, "builtin"} {
		t.Run(model, func(t *testing.T) {
			c := newCorpus(t, datasets.TechniqueHighQuality)
			if err := c.db.Exec(`UPDATE datasets SET embedding_model = ? WHERE id = ?`, model, c.id).Error; err != nil {
				t.Fatal(err)
			}
			texts := make([]string, len(set.Docs))
			byText := map[string]string{}
			for i, d := range set.Docs {
				texts[i] = d.Text
				byText[d.Text] = d.ID
			}
			c.add(t, "eval", strings.Join(texts, "\n"), lines)
			svc := retrieval.New(c.db, nil)

			// run returns the mean nDCG@10 over all queries, the first half
			// and the second.
			run := func(rm datasets.RetrievalModel) (all, first, second float64) {
				rm.TopK = 10
				for i, q := range set.Queries {
					hits, err := svc.Search(context.Background(), []string{c.id}, q.Q, rm)
					if err != nil {
						t.Fatal(err)
					}
					ranked := make([]string, 0, len(hits))
					for _, h := range hits {
						ranked = append(ranked, byText[h.Segment.Content])
					}
					n := ndcg10(ranked, q.Rel)
					all += n
					if i < firstHalf {
						first += n
					} else {
						second += n
					}
				}
				return all / float64(len(set.Queries)), first / firstHalf, second / float64(len(set.Queries)-firstHalf)
			}
			fullText, _, _ := run(method(ft, 0, 0, false))
			semantic, _, _ := run(method(sem, 0, 0, false))
			hybrid, _, _ := run(method(hyb, 0, 0, false))
			better := max(fullText, semantic)

			type check struct {
				name  string
				rm    datasets.RetrievalModel
				floor float64
			}
			checks := []check{
				{"full_text_search", method(ft, 0, 0, false), 0.88},
				{"full_text_search + builtin rerank", method(ft, 0, 0, true), fullText},
				{"semantic_search + builtin rerank", method(sem, 0, 0, true), semantic},
				{"hybrid_search + builtin rerank", method(hyb, 0, 0, true), hybrid},
			}
			if model == llm.BuiltinEmbeddingModel {
				checks = append(checks,
					check{"semantic_search", method(sem, 0, 0, false), 0.88},
					check{"hybrid_search default weights", method(hyb, 0, 0, false), better},
					check{"hybrid_search 0.9/0.1", method(hyb, 0.9, 0.1, false), better},
					check{"hybrid_search 0.5/0.5", method(hyb, 0.5, 0.5, false), better},
					check{"hybrid_search 0.3/0.7", method(hyb, 0.3, 0.7, false), better},
					// Weights this far towards one side give at least that
					// side.
					check{"hybrid_search 0.1/0.9", method(hyb, 0.1, 0.9, false), fullText},
				)
			} else {
				// The first builtin embedding is weak: hybrid search beats
				// both parts only when the weights favour full text, and
				// otherwise at least the side they favour.
				checks = append(checks,
					check{"semantic_search", method(sem, 0, 0, false), 0.78},
					check{"hybrid_search default weights", method(hyb, 0, 0, false), semantic},
					check{"hybrid_search 0.3/0.7", method(hyb, 0.3, 0.7, false), better},
				)
			}
			for _, ck := range checks {
				got, first, second := run(ck.rm)
				t.Logf("%-34s nDCG@10 %.4f (first half %.4f, second %.4f; floor %.4f)", ck.name, got, first, second, ck.floor)
				if got < ck.floor-1e-9 {
					t.Errorf("%s: nDCG@10 %.4f is below %.4f", ck.name, got, ck.floor)
				}
			}
		})
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
			c := newCorpus(t, datasets.TechniqueHighQuality)
			c.add(t, "a", "walrus colonies rest on arctic ice", lines)
			c.add(t, "b", "penguin colonies nest on antarctic ice", lines)
			svc := retrieval.New(c.db, nil)
			// Semantic search relies on the cached set alone to skip documents.
			rm := datasets.RetrievalModel{SearchMethod: datasets.SearchSemantic, TopK: 2}
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
