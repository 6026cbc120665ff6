package retrieval_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/retrieval"
)

// The caches a search keeps between requests (the usable documents, the
// per-vector-set mask of them, the vectors) never return a chunk of a
// document that was disabled, archived or deleted since, nor hide one
// that came back; every step searches with the same warm Service, by each
// method, with and without a metadata filter.
func TestSearchCachesFollowDocumentChanges(t *testing.T) {
	c := newCorpus(t, datasets.TechniqueHighQuality)
	ctx := context.Background()
	a := c.add(t, "a", "Tea grows on hills.", lines)
	b := c.add(t, "b", "Tea is dried in the sun.", lines)
	svc := retrieval.New(c.db, nil)
	// A filter every document passes: such searches build their own set
	// of allowed documents instead of using the shared one.
	all := &datasets.MetadataFilter{Conditions: []datasets.MetadataCondition{
		{Name: datasets.FieldDocumentName, ComparisonOperator: "not empty"}}}
	check := func(step, want string) {
		t.Helper()
		for _, method := range []string{datasets.SearchSemantic, datasets.SearchFullText, datasets.SearchHybrid, datasets.SearchKeyword} {
			for _, filter := range []*datasets.MetadataFilter{nil, all} {
				hits, err := svc.Search(ctx, []string{c.id}, "tea", datasets.RetrievalModel{SearchMethod: method, TopK: 10,
					MetadataFilteringConditions: filter})
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, h := range hits {
					names = append(names, h.Document.Name)
				}
				slices.Sort(names)
				if got := strings.Join(names, ","); got != want {
					t.Fatalf("%s: %s (filter %v): documents %q, want %q", step, method, filter != nil, got, want)
				}
			}
		}
	}
	// The first search sees b disabled, so that a cache kept from it
	// would go on hiding b.
	if err := c.docs.SetStatus(ctx, c.actor, c.id, documents.ActionDisable, []string{b}); err != nil {
		t.Fatal(err)
	}
	check("start", "a")
	steps := []struct {
		name, action, doc, want string
	}{
		{"enable b", documents.ActionEnable, b, "a,b"},
		{"disable a", documents.ActionDisable, a, "b"},
		{"enable a", documents.ActionEnable, a, "a,b"},
		{"archive b", documents.ActionArchive, b, "a"},
		{"unarchive b", documents.ActionUnarchive, b, "a,b"},
	}
	for _, s := range steps {
		if err := c.docs.SetStatus(ctx, c.actor, c.id, s.action, []string{s.doc}); err != nil {
			t.Fatal(err)
		}
		check(s.name, s.want)
	}
	third := c.add(t, "c", "Tea is sold in tins.", lines)
	check("add c", "a,b,c")
	if err := c.docs.DeleteDocument(ctx, c.actor, c.id, a); err != nil {
		t.Fatal(err)
	}
	check("delete a", "b,c")
	if err := c.docs.SetStatus(ctx, c.actor, c.id, documents.ActionDisable, []string{third}); err != nil {
		t.Fatal(err)
	}
	check("disable c", "b")
}
