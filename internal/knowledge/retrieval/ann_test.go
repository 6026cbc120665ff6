package retrieval

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"appkb/internal/knowledge/retrieval/vecindex"
	"appkb/internal/llm"
)

// TestApproximateIndexRecall builds vector sets of builtin embeddings
// large enough for the approximate index, and checks that the index's top
// ten results overlap the exact scan's (recall@10 averaged over many
// queries; recall@100 is logged): at least 0.98 with the default model,
// 0.9 with the first builtin model, whose vectors cluster worse. Texts are
// drawn from topics (word pools) so that, like real chunks, they cluster.
func TestApproximateIndexRecall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 25,000-vector indexes")
	}
	tests := []struct {
		name  string
		embed func(string) []float32
		floor float64
	}{
		{name: llm.BuiltinEmbeddingModel, embed: llm.BuiltinEmbedding2, floor: 0.98},
		{name: "builtin", embed: llm.BuiltinEmbedding, floor: 0.9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const n, topics, queries = 25000, 200, 60
			rng := rand.New(rand.NewPCG(7, 11))
			vocab := make([]string, 6000)
			for i := range vocab {
				vocab[i] = fmt.Sprintf("w%dx%c", i, 'a'+rune(i%26))
			}
			pools := make([][]string, topics)
			for i := range pools {
				for range 40 {
					pools[i] = append(pools[i], vocab[rng.IntN(len(vocab))])
				}
			}
			text := func() string {
				pool := pools[rng.IntN(topics)]
				words := make([]string, 12+rng.IntN(20))
				for i := range words {
					if rng.IntN(4) == 0 {
						words[i] = vocab[rng.IntN(len(vocab))]
					} else {
						words[i] = pool[rng.IntN(len(pool))]
					}
				}
				return strings.Join(words, " ")
			}
			set := &vectorSet{docIDs: []string{"doc"}}
			for i := range n {
				set.add(fmt.Sprint(i), "", tc.embed(text()), 0)
			}
			// As the cache builds it (see vectorSet.index).
			ix := vecindex.Build(set.vecs, set.dims, vecindex.Options{Seed: 1, Iterations: 6})
			allowed := map[string]bool{"doc": true}
			for _, k := range []int{10, 100} {
				var hit, total int
				for range queries {
					q := tc.embed(text())
					exact := set.scoreWith(q, allowed, k, nil)
					approx := set.scoreWith(q, allowed, k, ix)
					want := map[string]bool{}
					for _, c := range exact {
						want[c.segment] = true
					}
					for _, c := range approx {
						if want[c.segment] {
							hit++
						}
					}
					total += len(exact)
				}
				recall := float64(hit) / float64(total)
				t.Logf("recall@%d %.3f (%d clusters, %d probed)", k, recall, ix.Lists(), annProbe(ix))
				if k == 10 && recall < tc.floor {
					t.Errorf("recall@%d %.3f is below %.2f", k, recall, tc.floor)
				}
			}
		})
	}
}

// TestGroupedSetScoresAlike rearranges a vector set by cluster and checks
// that every kind of search over it (through the index, full scan with a
// bound, unbounded) returns the same candidates in the same order, with the
// same scores, as the set in load order. The set has duplicate vectors, so
// ties must still go to the vector read first, and a filter that leaves
// too few vectors in the probed clusters, so the fallback scan is covered.
func TestGroupedSetScoresAlike(t *testing.T) {
	const n = 3000
	rng := rand.New(rand.NewPCG(3, 5))
	words := strings.Fields("tea coffee water bicycle chain oil garden flower seed river bridge mountain snow winter summer market price")
	text := func() string {
		w := make([]string, 4+rng.IntN(6))
		for i := range w {
			w[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(w, " ")
	}
	set := &vectorSet{docIDs: []string{"a", "b", "c"}}
	for i := range n {
		t := text()
		if i%10 == 3 {
			t = "tea coffee water" // many identical vectors
		}
		set.add(fmt.Sprint(i), "", llm.BuiltinEmbedding(t), int32(rng.IntN(3)))
	}
	ix := vecindex.Build(set.vecs, set.dims, vecindex.Options{Seed: 1, Lists: 40})
	g := set.grouped(ix)
	gix := g.ann.Load()
	if gix == nil || g.orig == nil {
		t.Fatal("grouped set without its index")
	}
	queries := []string{"tea coffee water", "bicycle chain", "snow winter mountain river", "price"}
	filters := []map[string]bool{{"a": true, "b": true, "c": true}, {"b": true}}
	for _, q := range queries {
		qv := llm.BuiltinEmbedding(q)
		for _, allowed := range filters {
			for _, limit := range []int{0, 5, 50, 2000} {
				cases := []struct {
					name      string
					want, got []cand
				}{
					{"index", set.scoreWith(qv, allowed, limit, ix), g.scoreWith(qv, allowed, limit, gix)},
					{"scan", set.scoreWith(qv, allowed, limit, nil), g.scoreWith(qv, allowed, limit, nil)},
				}
				for _, c := range cases {
					if !slices.Equal(c.want, c.got) {
						t.Fatalf("%q, %d allowed, limit %d, %s: grouped set gave %d candidates, %v..., want %d, %v...",
							q, len(allowed), limit, c.name, len(c.got), c.got[:min(3, len(c.got))], len(c.want), c.want[:min(3, len(c.want))])
					}
				}
			}
		}
	}
}
