package retrieval_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/retrieval"
	"appkb/internal/knowledge/textsplit"
)

// Full-text search ranks by the index first and reads rows only for the
// best matches (SQLite); it must rank exactly as the query that joins
// every match does, also when chunks of another knowledge base or of
// disabled documents fill the best matches, and with a metadata filter.
func TestFullTextRanksAsTheJoinedQuery(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	ctx := context.Background()
	var teaLines []string
	for _, w := range strings.Fields("hills sun tins cups leaves water kettles shops gardens boxes") {
		teaLines = append(teaLines, "Tea is kept near "+w+" and many other things around the house today.")
	}
	c.add(t, "a", strings.Join(teaLines[:5], "\n"), lines)
	b := c.add(t, "b", strings.Join(teaLines[5:], "\n"), lines)
	svc := retrieval.New(c.db, nil)
	sqlite := !db.IsPostgres(c.db)
	check := func(step string, filter *datasets.MetadataFilter, limit int, wantTwoStep bool) {
		t.Helper()
		got, want, twoStep, err := retrieval.FullTextRanks(svc, []string{c.id}, "tea house", filter, limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s, limit %d: ranked %q, the joined query %q", step, limit, got, want)
		}
		if len(got) == 0 {
			t.Fatalf("%s: nothing found", step)
		}
		if sqlite && twoStep != wantTwoStep {
			t.Fatalf("%s, limit %d: ranked by the index first %v, want %v", step, limit, twoStep, wantTwoStep)
		}
	}
	for _, limit := range []int{1, 3, 10, 100} {
		check("one knowledge base", nil, limit, true)
	}
	// A chunk disabled after its facts were read (and so kept in memory)
	// drops out, and comes back once enabled.
	best, _, _, err := retrieval.FullTextRanks(svc, []string{c.id}, "tea house", nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		if _, err := c.docs.UpdateSegment(ctx, c.actor, c.id, c.segmentDoc(t, best[0]), best[0], documents.SegmentUpdate{Enabled: &on}); err != nil {
			t.Fatal(err)
		}
		got, _, _, err := retrieval.FullTextRanks(svc, []string{c.id}, "tea house", nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(got, best[0]) != on {
			t.Fatalf("chunk enabled %v: ranked %q", on, got)
		}
		check(fmt.Sprintf("chunk enabled %v", on), nil, 3, true)
		check(fmt.Sprintf("chunk enabled %v", on), nil, 100, true)
	}

	// Shorter chunks of another knowledge base, saying "tea" more often,
	// fill the best matches: the first step finds too few and the joined
	// query answers.
	other := newCorpusOn(t, c.db, c.docs, datasets.TechniqueHighQuality)
	var strong []string
	for range 12 {
		strong = append(strong, "Tea tea tea house.")
	}
	other.add(t, "strong", strings.Join(strong, "\n"), lines)
	check("crowded by another knowledge base", nil, 3, false)
	check("crowded, every match", nil, 100, true)

	// A disabled document's chunks do not count either.
	if err := c.docs.SetStatus(ctx, c.actor, c.id, documents.ActionDisable, []string{b}); err != nil {
		t.Fatal(err)
	}
	check("disabled document", nil, 100, true)
	check("disabled document, crowded", nil, 4, false)

	// A metadata filter narrows the documents.
	if err := c.docs.SetStatus(ctx, c.actor, c.id, documents.ActionEnable, []string{b}); err != nil {
		t.Fatal(err)
	}
	onlyA := &datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{
		{Name: datasets.FieldDocumentName, ComparisonOperator: "is", Value: "a"}}}
	check("metadata filter", onlyA, 100, true)
	check("metadata filter, crowded", onlyA, 2, false)

	// Parent chunks of parent-child documents are in the index too, but
	// their child chunks are what full-text search ranks (elsewhere).
	h := newCorpus(t, datasets.TechniqueHighQuality)
	h.add(t, "h", "Tea house tea house.\nTea house again.\n\nTea house once more.", &textsplit.ProcessRule{Mode: "hierarchical",
		Rules: &textsplit.Rules{ParentMode: "paragraph"}})
	got, want, _, err := retrieval.FullTextRanks(retrieval.New(h.db, nil), []string{h.id}, "tea house", nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 || len(want) != 0 {
		t.Fatalf("parent-child knowledge base: ranked %q, the joined query %q, want no chunks", got, want)
	}
}

// segmentDoc is the document of a chunk.
func (c *corpus) segmentDoc(t *testing.T, segmentID string) string {
	t.Helper()
	var doc string
	if err := c.db.Raw(`SELECT document_id FROM segments WHERE id = ?`, segmentID).Scan(&doc).Error; err != nil {
		t.Fatal(err)
	}
	return doc
}

// A plain full-text search ranks a few candidates at first; when chunks
// that may not be returned fill them all, it ranks again in full and
// still returns the best that may be.
func TestFullTextShortRankingFallsBack(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	ctx := context.Background()
	var strong, weak []string
	for i := range 40 {
		strong = append(strong, fmt.Sprintf("Tea tea tea %d.", i))
	}
	for i := range 6 {
		weak = append(weak, fmt.Sprintf("Tea is grown on many hills in the sun, row %d.", i))
	}
	s := c.add(t, "strong", strings.Join(strong, "\n"), lines)
	c.add(t, "weak", strings.Join(weak, "\n"), lines)
	svc := retrieval.New(c.db, nil)
	search := func(want string) {
		t.Helper()
		hits, err := svc.Search(ctx, []string{c.id}, "tea", datasets.RetrievalModel{SearchMethod: datasets.SearchFullText, TopK: 4})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 4 {
			t.Fatalf("%d hits, want 4: %q", len(hits), contents(hits))
		}
		for _, h := range hits {
			if h.Document.Name != want {
				t.Fatalf("hit of %s, want only %s: %q", h.Document.Name, want, contents(hits))
			}
		}
	}
	search("strong")
	// Chunks still being indexed are ranked but never returned (a chunk
	// whose text was edited is indexed again); here the 40 best.
	if err := c.db.Exec(`UPDATE segments SET status = 'indexing' WHERE document_id = ?`, s).Error; err != nil {
		t.Fatal(err)
	}
	search("weak")
}
