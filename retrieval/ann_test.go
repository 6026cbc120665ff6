package retrieval

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"appkb/llm"
	"appkb/vecindex"
)

// TestApproximateIndexRecall builds a vector set of builtin embeddings
// large enough for the approximate index, and checks that the index's top
// ten results overlap the exact scan's (recall@10 averaged over many
// queries; recall@100 is logged). Texts are drawn from topics (word pools) so that, like real
// chunks, they cluster.
func TestApproximateIndexRecall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 25,000-vector index")
	}
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
		v := llm.BuiltinEmbedding(text())
		set.dims = len(v)
		set.vecs = append(set.vecs, v...)
		var s float32
		for _, x := range v {
			s += x * x
		}
		set.norms = append(set.norms, sqrt32(s))
		set.segments = append(set.segments, fmt.Sprint(i))
		set.children = append(set.children, "")
		set.docOf = append(set.docOf, 0)
	}
	ix := vecindex.Build(set.vecs, set.dims, vecindex.Options{Seed: 1})
	allowed := map[string]bool{"doc": true}
	for _, k := range []int{10, 100} {
		var hit, total int
		for range queries {
			q := llm.BuiltinEmbedding(text())
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
		if k == 10 && recall < 0.9 {
			t.Errorf("recall@%d %.3f is below 0.9", k, recall)
		}
	}
}

func sqrt32(x float32) float32 {
	z := x
	if z == 0 {
		return 0
	}
	for range 20 {
		z = (z + x/z) / 2
	}
	return z
}
