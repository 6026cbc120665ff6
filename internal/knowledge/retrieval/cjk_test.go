package retrieval_test

import (
	"context"
	"strings"
	"testing"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/retrieval"
)

// Chinese and Japanese chunks are found by the words of a query, which
// shares no whole run of characters with them, by full-text search,
// keyword search (economy knowledge bases) and hybrid search, also with
// English words mixed in.
func TestCJKSearch(t *testing.T) {
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
