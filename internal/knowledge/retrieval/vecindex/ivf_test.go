package vecindex

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestRecallOnClusteredData compares the candidates of the nearest
// clusters with an exact scan on vectors drawn around random centres.
func TestRecallOnClusteredData(t *testing.T) {
	const n, dims, centres, k = 8000, 32, 40, 10
	rng := rand.New(rand.NewPCG(1, 2))
	cs := make([]float32, centres*dims)
	for i := range cs {
		cs[i] = float32(rng.NormFloat64())
	}
	vecs := make([]float32, n*dims)
	for i := range n {
		c := rng.IntN(centres)
		for j := range dims {
			vecs[i*dims+j] = cs[c*dims+j] + 0.4*float32(rng.NormFloat64())
		}
	}
	ix := Build(vecs, dims, Options{Seed: 3})
	if ix.Lists() != 89 {
		t.Fatalf("%d lists, want √n = 89", ix.Lists())
	}
	total := 0
	for _, l := range ix.lists {
		total += len(l)
	}
	if total != n {
		t.Fatalf("lists hold %d vectors, want %d", total, n)
	}
	cos := func(q []float32, i int) float32 {
		v := vecs[i*dims : (i+1)*dims]
		return Dot(q, v) / sqrt(Dot(v, v)) / sqrt(Dot(q, q))
	}
	top := func(q []float32, ids []int) []int {
		score := make(map[int]float32, len(ids))
		for _, i := range ids {
			score[i] = cos(q, i)
		}
		sort.Slice(ids, func(a, b int) bool { return score[ids[a]] > score[ids[b]] })
		return ids[:min(k, len(ids))]
	}
	tests := []struct {
		name      string
		nprobe    int
		minRecall float64
	}{
		{"one cluster", 1, 0.5},
		{"a tenth of the clusters", 9, 0.95},
		{"all clusters", 89, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits, want := 0, 0
			for range 50 {
				q := make([]float32, dims)
				c := rng.IntN(centres)
				for j := range q {
					q[j] = cs[c*dims+j] + 0.4*float32(rng.NormFloat64())
				}
				all := make([]int, n)
				for i := range all {
					all[i] = i
				}
				exact := top(q, all)
				var cand []int
				ix.Candidates(q, tt.nprobe, func(i int32) { cand = append(cand, int(i)) })
				got := map[int]bool{}
				for _, i := range top(q, cand) {
					got[i] = true
				}
				for _, i := range exact {
					if got[i] {
						hits++
					}
				}
				want += len(exact)
			}
			if r := float64(hits) / float64(want); r < tt.minRecall {
				t.Errorf("recall@%d %.3f, want at least %.2f", k, r, tt.minRecall)
			}
		})
	}
}

func sqrt(x float32) float32 {
	z := x
	for range 30 {
		z = (z + x/z) / 2
	}
	return z
}

// TestGrouped checks that Grouped's order is a permutation that lays the
// clusters out one after the other, and that its index lists the same
// vectors per cluster under their new positions.
func TestGrouped(t *testing.T) {
	const n, dims = 2000, 16
	rng := rand.New(rand.NewPCG(4, 9))
	vecs := make([]float32, n*dims)
	for i := range vecs {
		vecs[i] = float32(rng.NormFloat64())
	}
	ix := Build(vecs, dims, Options{Seed: 2, Lists: 30})
	order, g := ix.Grouped()
	if len(order) != n || g.Lists() != ix.Lists() {
		t.Fatalf("%d positions, %d lists", len(order), g.Lists())
	}
	seen := make([]bool, n)
	next := int32(0)
	for c := range ix.lists {
		if len(g.lists[c]) != len(ix.lists[c]) {
			t.Fatalf("cluster %d: %d members, want %d", c, len(g.lists[c]), len(ix.lists[c]))
		}
		for k, pos := range g.lists[c] {
			if pos != next {
				t.Fatalf("cluster %d: position %d, want %d (contiguous)", c, pos, next)
			}
			next++
			if order[pos] != ix.lists[c][k] || seen[order[pos]] {
				t.Fatalf("cluster %d: position %d holds vector %d, want %d once", c, pos, order[pos], ix.lists[c][k])
			}
			seen[order[pos]] = true
		}
	}
	q := vecs[:dims]
	var a, b []int32
	ix.Candidates(q, 5, func(i int32) { a = append(a, i) })
	g.Candidates(q, 5, func(i int32) { b = append(b, order[i]) })
	if !slices.Equal(a, b) {
		t.Fatal("the grouped index picks other vectors for a query")
	}
}
