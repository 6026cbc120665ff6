package retrieval_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/retrieval"
	"appkb/internal/knowledge/textsplit"
)

// Chinese and Japanese chunks are found by the words of a query, which
// shares no whole run of characters with them, by full-text search,
// keyword search (economy knowledge bases) and hybrid search, also with
// English words mixed in.
func TestCJKSearch(t *testing.T) {
	loadDictionary()
	const (
		leave   = "员工每年享有十天带薪年假，请假需提前三天在系统中提交申请。"
		bikes   = "员工的自行车请停放在地下一层的自行车停车场，电动车不得进入大楼。"
		travel  = "出差旅费报销需在返回后五个工作日内提交发票，住宿标准按城市等级执行。"
		jaRoom  = "会議室の予約はポータルサイトから行ってください。"
		jaTrain = "東京駅から新幹線で大阪へ移動する場合、交通費は経費として精算できます。"
		mixed   = "我们用Python和PostgreSQL搭建了API服务，部署在Kubernetes集群上。"
	)
	tests := []struct {
		query, want string
	}{
		{"自行车停在哪里", bikes},
		{"年假怎么请", leave},
		{"差旅费如何报销", travel},
		{"会議室を予約したい", jaRoom},
		{"新幹線の交通費", jaTrain},
		{"python api 服务", mixed},
	}
	for _, technique := range []string{datasets.TechniqueHighQuality, datasets.TechniqueEconomy} {
		t.Run(technique, func(t *testing.T) {
			c := newCorpus(t, technique)
			c.add(t, "zh", strings.Join([]string{leave, bikes, travel, mixed}, "\n"), lines)
			c.add(t, "ja", jaRoom+"\n"+jaTrain, lines)
			svc := retrieval.New(c.db, nil)
			methods := []string{datasets.SearchKeyword}
			if technique == datasets.TechniqueHighQuality {
				methods = []string{datasets.SearchFullText, datasets.SearchHybrid}
			}
			for _, m := range methods {
				for _, tc := range tests {
					hits, err := svc.Search(context.Background(), []string{c.id}, tc.query, datasets.RetrievalModel{SearchMethod: m, TopK: 3})
					if err != nil {
						t.Fatal(err)
					}
					if len(hits) == 0 || hits[0].Segment.Content != tc.want {
						t.Errorf("%s %q: got %q, want %q first", m, tc.query, contents(hits), tc.want)
					}
				}
			}
		})
	}
}

// TestCJKCollections runs the Chinese and the Japanese collections of
// testdata (eval_zh.json, eval_ja.json: short and long passages, some with
// English words, one judged passage per query) with full-text and hybrid
// search on a high_quality knowledge base and keyword search on an economy
// one: each must rank the judged passage in the top 3 for at least 90% of
// the queries.
func TestCJKCollections(t *testing.T) {
	loadDictionary()
	for _, lang := range []string{"zh", "ja"} {
		t.Run(lang, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/eval_" + lang + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var set evalSet
			if err := json.Unmarshal(raw, &set); err != nil {
				t.Fatal(err)
			}
			if len(set.Docs) < 50 || len(set.Queries) < 30 {
				t.Fatalf("%d passages, %d queries", len(set.Docs), len(set.Queries))
			}
			byText := map[string]string{}
			texts := make([]string, len(set.Docs))
			for i, d := range set.Docs {
				texts[i] = d.Text
				byText[d.Text] = d.ID
			}
			for _, tc := range []struct{ technique, method string }{
				{datasets.TechniqueHighQuality, datasets.SearchFullText},
				{datasets.TechniqueHighQuality, datasets.SearchHybrid},
				{datasets.TechniqueEconomy, datasets.SearchKeyword},
			} {
				c := newCorpus(t, tc.technique)
				c.add(t, "eval", strings.Join(texts, "\n"), longLines)
				svc := retrieval.New(c.db, nil)
				found := 0
				for _, q := range set.Queries {
					hits, err := svc.Search(context.Background(), []string{c.id}, q.Q, datasets.RetrievalModel{SearchMethod: tc.method, TopK: 3})
					if err != nil {
						t.Fatal(err)
					}
					var top []string
					for _, h := range hits {
						id, ok := byText[h.Segment.Content]
						if !ok {
							t.Fatalf("hit %q is no passage", h.Segment.Content)
						}
						top = append(top, id)
						if q.Rel[id] > 0 {
							found++
							break
						}
					}
					if len(top) == 0 || q.Rel[top[len(top)-1]] == 0 {
						t.Logf("%s %q: judged passage not in the top 3 %v", tc.method, q.Q, top)
					}
				}
				rate := float64(found) / float64(len(set.Queries))
				t.Logf("%-16s judged passage in the top 3 for %.1f%% of %d queries", tc.method, 100*rate, len(set.Queries))
				if rate < 0.9 {
					t.Errorf("%s: judged passage in the top 3 for %.1f%% of queries, want at least 90%%", tc.method, 100*rate)
				}
			}
		})
	}
}

// longLines indexes one chunk per line, lines of up to 1,000 tokens.
var longLines = &textsplit.ProcessRule{Mode: "custom", Rules: &textsplit.Rules{
	Segmentation: &textsplit.Segmentation{Separator: `\n`, MaxTokens: 1000}}}

// loadDictionary loads the Chinese dictionary ahead (seconds under the race
// detector), so that the indexing the tests wait for does not include it.
func loadDictionary() { textsplit.Keywords("中文", 1) }
