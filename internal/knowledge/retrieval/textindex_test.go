package retrieval_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/retrieval"
	"appkb/internal/knowledge/textsplit"
)

// The ranking index splits and stems text as the segments_fts tokenizer
// does (SQLite tells its tokens through an fts5vocab table).
func TestTextTokensAsFTS5(t *testing.T) {
	gdb := db.OpenTemp(t)
	if db.IsPostgres(gdb) {
		t.Skip("FTS5's tokenizer is SQLite's")
	}
	for _, stmt := range []string{
		`CREATE VIRTUAL TABLE tok_probe USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')`,
		`CREATE VIRTUAL TABLE tok_probe_v USING fts5vocab(tok_probe, 'instance')`,
	} {
		if err := gdb.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	for i, text := range []string{
		"Indexing indexed INDEXES, the indexer's index.",
		"Café crème brûlée — naïve façade; Zoë's résumé.",
		"Running runs ran: 3 runners in 2024 ran 10km.",
		"The quick brown fox jumps over the lazy dog's back",
		"Hyphen-ated words_and_underscores / slashes.and.dots",
		"Generalizations, conditional, relational, hopefulness, happiness",
		"Ελληνικά και Русский текст",
	} {
		if err := gdb.Exec(`INSERT INTO tok_probe(rowid, x) VALUES (?, ?)`, i+1, text).Error; err != nil {
			t.Fatal(err)
		}
		var want []string
		if err := gdb.Raw(`SELECT term FROM tok_probe_v WHERE doc = ? ORDER BY offset`, i+1).Scan(&want).Error; err != nil {
			t.Fatal(err)
		}
		if got := retrieval.TextTokens(text); !slices.Equal(got, want) {
			t.Errorf("%q: tokens %q, FTS5's %q", text, got, want)
		}
	}
}

// textCorpus fills a knowledge base with chunks of varied lengths and
// term frequencies, so that BM25's parts (idf, frequency, length) all
// decide some order.
func textCorpus(t *testing.T) *corpus {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	var a, b []string
	words := strings.Fields("tea house garden kettle leaves water cup sun hills shop box spoon")
	for i := range 30 {
		var line []string
		for j := range 3 + i%7 {
			line = append(line, words[(i*j+i)%len(words)])
		}
		if i%4 == 0 {
			line = append(line, "the", "of", "indexing")
		}
		if i%5 == 0 {
			line = append(line, "indexed", "café")
		}
		line = append(line, fmt.Sprintf("row%d.", i))
		if i%2 == 0 {
			a = append(a, strings.Join(line, " "))
		} else {
			b = append(b, strings.Join(line, " "))
		}
	}
	c.add(t, "a", strings.Join(a, "\n"), lines)
	c.add(t, "b", strings.Join(b, "\n"), lines)
	return c
}

// sameRanking fails unless got and want name the same candidates in the
// same order with the same scores.
func sameRanking(t *testing.T, step string, got, want []retrieval.TextCand) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: the SQL path found nothing; the case tests nothing", step)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: the index ranked %d candidates, SQL %d", step, len(got), len(want))
	}
	for i := range want {
		if got[i].Segment != want[i].Segment || got[i].Child != want[i].Child ||
			math.Abs(got[i].Score-want[i].Score) > 1e-12 {
			t.Fatalf("%s: at %d the index has %+v, SQL %+v", step, i, got[i], want[i])
		}
	}
}

// On one knowledge base (so that FTS5's statistics, over the whole table,
// are the knowledge base's), the index ranks exactly as FTS5 does, with
// the same scores: with chunks disabled, documents disabled, a metadata
// filter, and for child chunks.
func TestTextIndexRanksAsFTS5(t *testing.T) {
	c := textCorpus(t)
	if db.IsPostgres(c.db) {
		t.Skip("PostgreSQL's SQL path ranks with ts_rank_cd; the index ranks with FTS5's BM25 on both engines")
	}
	ctx := context.Background()
	svc := retrieval.New(c.db, nil)
	compare := func(step string, filter *datasets.MetadataFilter) {
		t.Helper()
		if err := retrieval.WaitTextIndex(svc, c.id); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"tea", "tea house", "Indexing indexed", "the of", "cafe", "garden kettle spoon row3", "box box"} {
			for _, limit := range []int{1, 5, 100} {
				want, err := retrieval.FullTextSQL(svc, []string{c.id}, q, filter, limit)
				if err != nil {
					t.Fatal(err)
				}
				got, indexed, err := retrieval.FullTextIndexed(svc, []string{c.id}, q, filter, limit)
				if err != nil {
					t.Fatal(err)
				}
				if !indexed {
					t.Fatalf("%s: the index was not used", step)
				}
				sameRanking(t, fmt.Sprintf("%s, %q, limit %d", step, q, limit), got, want)
			}
		}
	}
	compare("all enabled", nil)

	top, err := retrieval.FullTextSQL(svc, []string{c.id}, "tea", nil, 1)
	if err != nil || len(top) != 1 {
		t.Fatal(top, err)
	}
	off := false
	if _, err := c.docs.UpdateSegment(ctx, c.actor, c.id, c.segmentDoc(t, top[0].Segment), top[0].Segment, documents.SegmentUpdate{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	compare("a chunk disabled", nil)

	onlyA := &datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{
		{Name: datasets.FieldDocumentName, ComparisonOperator: "is", Value: "a"}}}
	compare("metadata filter", onlyA)

	if err := c.docs.SetStatus(ctx, c.actor, c.id, documents.ActionDisable, []string{c.ids["b"]}); err != nil {
		t.Fatal(err)
	}
	compare("a document disabled", nil)

	// Child chunks rank alike, in a parent-child knowledge base.
	h := newCorpus(t, datasets.TechniqueHighQuality)
	h.add(t, "h", "Tea house tea house.\nTea house again and the kettle.\n\nTea garden once more, the leaves.\nA cup of tea, row3.\n\nIndexing the box of spoons at the café.",
		&textsplit.ProcessRule{Mode: "hierarchical", Rules: &textsplit.Rules{ParentMode: "paragraph"}})
	c, svc = h, retrieval.New(h.db, nil)
	compare("child chunks", nil)
	got, _, err := retrieval.FullTextIndexed(svc, []string{c.id}, "tea", nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || slices.ContainsFunc(got, func(c retrieval.TextCand) bool { return c.Child == "" }) {
		t.Fatalf("want child chunks only: %+v", got)
	}
}

// Every change to the chunks is seen by the very next search: the index
// that was current before it is not used until read again, and searches
// meanwhile go through SQL. Before each change the index is current and
// answers, so a search that trusted it after the change would fail.
func TestTextIndexReadYourWrites(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	ctx := context.Background()
	doc := c.add(t, "d", "Zebras graze on the plains.\nLions sleep in the shade.\nGiraffes reach the tall trees.", lines)
	svc := retrieval.New(c.db, nil)
	other := retrieval.New(c.db, nil) // another replica's search
	chunk := func(text string) string {
		t.Helper()
		var id string
		if err := c.db.Raw(`SELECT id FROM segments WHERE dataset_id = ? AND content = ?`, c.id, text).Scan(&id).Error; err != nil || id == "" {
			t.Fatalf("no chunk %q: %v", text, err)
		}
		return id
	}
	lions := chunk("Lions sleep in the shade.")
	zebras := chunk("Zebras graze on the plains.")
	found := func(query string) []string {
		t.Helper()
		cs, err := retrieval.FullTextCandidates(svc, []string{c.id}, query, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range cs {
			ids = append(ids, c.Segment)
		}
		return ids
	}
	var added string
	for _, step := range []struct {
		name   string
		change func()
		query  string
		want   func() []string
	}{
		{"edit", func() {
			text := "Lions hunt zebras at dusk."
			if _, err := c.docs.UpdateSegment(ctx, c.actor, c.id, doc, lions, documents.SegmentUpdate{Content: &text}); err != nil {
				t.Fatal(err)
			}
		}, "dusk", func() []string { return []string{lions} }},
		{"disable", func() {
			off := false
			if _, err := c.docs.UpdateSegment(ctx, c.actor, c.id, doc, zebras, documents.SegmentUpdate{Enabled: &off}); err != nil {
				t.Fatal(err)
			}
		}, "zebras", func() []string { return []string{lions} }},
		{"enable", func() {
			on := true
			if _, err := c.docs.UpdateSegment(ctx, c.actor, c.id, doc, zebras, documents.SegmentUpdate{Enabled: &on}); err != nil {
				t.Fatal(err)
			}
		}, "plains", func() []string { return []string{zebras} }},
		{"add", func() {
			added = c.add(t, "e", "Elephants remember the plains.", lines)
		}, "elephants", func() []string { return []string{chunk("Elephants remember the plains.")} }},
		{"delete a chunk", func() {
			if err := c.docs.DeleteSegment(ctx, c.actor, c.id, doc, zebras); err != nil {
				t.Fatal(err)
			}
		}, "plains", func() []string { return []string{chunk("Elephants remember the plains.")} }},
		{"delete a document", func() {
			if err := c.docs.DeleteDocument(ctx, c.actor, c.id, added); err != nil {
				t.Fatal(err)
			}
		}, "plains elephants", func() []string { return nil }},
	} {
		for _, s := range []*retrieval.Service{svc, other} {
			if err := retrieval.WaitTextIndex(s, c.id); err != nil {
				t.Fatal(err)
			}
			if _, indexed, err := retrieval.FullTextIndexed(s, []string{c.id}, step.query, nil, 10); err != nil || !indexed {
				t.Fatalf("%s: the index was not current before the change (%v)", step.name, err)
			}
		}
		step.change()
		for _, s := range []*retrieval.Service{svc, other} {
			if _, indexed, err := retrieval.FullTextIndexed(s, []string{c.id}, step.query, nil, 10); err != nil || indexed {
				t.Fatalf("%s: the index of before the change was used (%v)", step.name, err)
			}
		}
		want := step.want()
		if got := found(step.query); !slices.Equal(got, want) {
			t.Fatalf("%s: right after the change %q found %q, want %q", step.name, step.query, got, want)
		}
		if err := retrieval.WaitTextIndex(svc, c.id); err != nil {
			t.Fatal(err)
		}
		got, indexed, err := retrieval.FullTextIndexed(svc, []string{c.id}, step.query, nil, 10)
		if err != nil || !indexed {
			t.Fatalf("%s: the index was not read again (%v)", step.name, err)
		}
		var ids []string
		for _, c := range got {
			ids = append(ids, c.Segment)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("%s: the index read again found %q, want %q", step.name, ids, want)
		}
	}
	// A hit count is no change to the text: the index stays current.
	if err := retrieval.WaitTextIndex(svc, c.id); err != nil {
		t.Fatal(err)
	}
	if err := c.db.Exec(`UPDATE segments SET hit_count = hit_count + 1 WHERE dataset_id = ?`, c.id).Error; err != nil {
		t.Fatal(err)
	}
	if _, indexed, err := retrieval.FullTextIndexed(svc, []string{c.id}, "lions", nil, 10); err != nil || !indexed {
		t.Fatalf("a hit count made the index out of date (%v)", err)
	}
}

// On either engine the index ranks by BM25 as written out here from the
// stored chunk texts (FTS5's formula: k1 1.2, b 0.75, idf floored at
// 1e-6, statistics over every chunk of the knowledge base, disabled ones
// too), leaving out disabled chunks.
func TestTextIndexRanksByBM25(t *testing.T) {
	c := textCorpus(t)
	ctx := context.Background()
	var rows []struct {
		ID      string
		Seq     int64
		Content string
		Enabled bool
	}
	load := func() {
		t.Helper()
		rows = nil
		if err := c.db.Raw(`SELECT id, seq, content, enabled FROM segments WHERE dataset_id = ? ORDER BY seq`, c.id).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
	}
	bm25 := func(query string) []retrieval.TextCand {
		toks := make([][]string, len(rows))
		total := 0
		for i, r := range rows {
			toks[i] = retrieval.TextTokens(r.Content)
			total += len(toks[i])
		}
		avg := float64(total) / float64(len(rows))
		score := make([]float64, len(rows))
		for _, term := range strings.FieldsFunc(strings.ToLower(query), func(r rune) bool { return r == ' ' }) {
			stem := retrieval.TextTokens(term)[0]
			df := 0
			for _, ts := range toks {
				if slices.Contains(ts, stem) {
					df++
				}
			}
			idf := math.Log((float64(len(rows)-df) + 0.5) / (float64(df) + 0.5))
			if idf <= 0 {
				idf = 1e-6
			}
			for i, ts := range toks {
				tf := 0.0
				for _, x := range ts {
					if x == stem {
						tf++
					}
				}
				score[i] += idf * (tf * 2.2) / (tf + 1.2*(0.25+0.75*float64(len(ts))/avg))
			}
		}
		var out []retrieval.TextCand
		for i, r := range rows {
			if score[i] > 0 && r.Enabled {
				out = append(out, retrieval.TextCand{Segment: r.ID, Score: score[i] / (score[i] + 1)})
			}
		}
		slices.SortStableFunc(out, func(a, b retrieval.TextCand) int {
			switch {
			case a.Score > b.Score:
				return -1
			case a.Score < b.Score:
				return 1
			}
			return 0
		})
		return out
	}
	svc := retrieval.New(c.db, nil)
	check := func(step string) {
		t.Helper()
		load()
		if err := retrieval.WaitTextIndex(svc, c.id); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"tea", "tea house", "indexing indexed", "the of", "café", "garden kettle spoon row3"} {
			got, indexed, err := retrieval.FullTextIndexed(svc, []string{c.id}, q, nil, 100)
			if err != nil || !indexed {
				t.Fatalf("%s: the index did not answer (%v)", step, err)
			}
			want := bm25(q)
			if len(got) != len(want) {
				t.Fatalf("%s, %q: the index ranked %d chunks, BM25 %d", step, q, len(got), len(want))
			}
			for i := range want {
				// Equal scores may come in either order here; the index
				// breaks ties by seq (TestTextIndexRanksAsFTS5).
				tied := i > 0 && want[i-1].Score == want[i].Score || i+1 < len(want) && want[i+1].Score == want[i].Score
				if math.Abs(got[i].Score-want[i].Score) > 1e-12 || !tied && got[i].Segment != want[i].Segment {
					t.Fatalf("%s, %q: at %d the index has %+v, BM25 %+v", step, q, i, got[i], want[i])
				}
			}
		}
	}
	check("all enabled")
	load()
	off := false
	if _, err := c.docs.UpdateSegment(ctx, c.actor, c.id, c.segmentDoc(t, rows[0].ID), rows[0].ID, documents.SegmentUpdate{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	check("a chunk disabled")
}
