package retrieval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/retrieval"
)

// indexedKeywords returns the rows of the inverted keyword index of a
// knowledge base and the rows the chunks' stored keyword lists call for,
// both as sorted "seq/keyword" strings.
func indexedKeywords(t *testing.T, c *corpus) (got, want []string) {
	t.Helper()
	var rows []struct {
		Seq     int64
		Keyword string
	}
	if err := c.db.Raw(`SELECT seq, keyword FROM segment_keywords WHERE dataset_id = ?`, c.id).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%d/%s", r.Seq, r.Keyword))
	}
	var segs []struct {
		Seq      int64
		Keywords string
	}
	if err := c.db.Raw(`SELECT seq, keywords FROM segments WHERE dataset_id = ?`, c.id).Scan(&segs).Error; err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		var kw []string
		if json.Unmarshal([]byte(s.Keywords), &kw) != nil {
			continue // a broken list contributes nothing
		}
		for _, k := range kw {
			want = append(want, fmt.Sprintf("%d/%s", s.Seq, k))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	return got, slices.Compact(want)
}

// TestKeywordIndexFollowsChunks checks that the inverted keyword index
// (migration 0026) holds exactly the stored keywords of the chunks after
// each kind of change, and that keyword search, which reads it, sees every
// change at once.
func TestKeywordIndexFollowsChunks(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	c.add(t, "drinks", tea+"\n"+coffee, lines)
	c.add(t, "life", cats+"\n"+bikes, lines)
	svc := retrieval.New(c.db, nil)
	ctx := context.Background()
	rm := datasets.RetrievalModel{SearchMethod: datasets.SearchKeyword, TopK: 4}
	search := func(q string) []string {
		t.Helper()
		hits, err := svc.Search(ctx, []string{c.id}, q, rm)
		if err != nil {
			t.Fatal(err)
		}
		return contents(hits)
	}
	steps := []struct {
		name   string
		change func() error
		query  string
		want   []string
	}{
		{name: "indexed documents", query: "bicycle chain", want: []string{bikes}},
		{name: "keywords rewritten", change: func() error {
			return c.db.Exec(`UPDATE segments SET keywords = ? WHERE content = ?`, `["kettle","bicycle"]`, tea).Error
		}, query: "kettle", want: []string{tea}},
		{name: "old keywords gone", query: "steamed", want: []string{}},
		{name: "chunk disabled", change: func() error {
			return c.db.Exec(`UPDATE segments SET enabled = FALSE WHERE content = ?`, bikes).Error
		}, query: "bicycle", want: []string{tea}},
		{name: "list that is not JSON", change: func() error {
			return c.db.Exec(`UPDATE segments SET keywords = ? WHERE content = ?`, `not json`, cats).Error
		}, query: "cats purr", want: []string{}},
		{name: "list repaired", change: func() error {
			return c.db.Exec(`UPDATE segments SET keywords = ? WHERE content = ?`, `["purr"]`, cats).Error
		}, query: "cats purr", want: []string{cats}},
		{name: "document deleted", change: func() error {
			return c.docs.DeleteDocument(ctx, c.actor, c.id, c.ids["drinks"])
		}, query: "kettle coffee", want: []string{}},
	}
	for _, st := range steps {
		if st.change != nil {
			if err := st.change(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		got, want := indexedKeywords(t, c)
		if len(want) == 0 && st.name != "document deleted" {
			t.Fatalf("%s: no stored keywords to compare", st.name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: index holds %v, chunks call for %v", st.name, got, want)
		}
		if hits := search(st.query); !slices.Equal(hits, st.want) {
			t.Errorf("%s: keyword search %q = %q, want %q", st.name, st.query, hits, st.want)
		}
	}
}
