package retrieval

import (
	"math"
	"testing"
)

// TestFuseScores checks the weighted sum of fuseScores on small lists: the
// weights, each side scaled by its best, the floor for chunks
// the semantic side did not keep, negative
// cosines, chunks found twice on one side and the tie order.
func TestFuseScores(t *testing.T) {
	c := func(seg string, score float64) cand { return cand{segment: seg, score: score} }
	// f is a full-text candidate of BM25 strength st (scored as
	// fullTextScore does); fuseScores divides strengths by the best.
	f := func(seg string, st float64) cand { return cand{segment: seg, score: st / (st + 1)} }
	tests := []struct {
		name    string
		sem, ft []cand
		vw, kw  float64
		want    []cand // in order
	}{
		{"Dify's default weights", []cand{c("a", 1), c("b", 0.5)}, []cand{f("b", 9), f("c", 3)}, 0.7, 0.3,
			[]cand{c("a", 0.7), c("b", 0.7*0.5+0.3*1), c("c", 0.7*0.5+0.3*(3.0/9))}},
		{"cosines are scaled by the best", []cand{c("a", 0.4), c("b", 0.2)}, []cand{f("b", 2)}, 0.5, 0.5,
			[]cand{c("b", 0.5*0.5+0.5), c("a", 0.5)}},
		{"weights need not add up to 1", []cand{c("a", 1), c("b", 0.5)}, []cand{f("b", 9)}, 1.4, 0.6,
			[]cand{c("a", 0.7), c("b", 0.7*0.5+0.3*1)}},
		{"keyword only", []cand{c("a", 0.8), c("b", 0.4)}, []cand{f("b", 9), f("a", 4.5)}, 0, 1,
			[]cand{c("b", 1), c("a", 0.5)}},
		{"full-text only chunks take the lowest cosine kept", []cand{c("a", 1), c("b", 0.4)}, []cand{f("z", 2)}, 0.5, 0.5,
			[]cand{c("z", 0.5*0.4+0.5*1), c("a", 0.5), c("b", 0.2)}},
		{"negative cosines count as 0", []cand{c("a", 1), c("b", -0.2)}, []cand{f("b", 4), f("z", 4)}, 0.5, 0.5,
			[]cand{c("a", 0.5), c("b", 0.5), c("z", 0.5)}},
		{"a chunk found twice counts once with its best score", []cand{c("a", 0.5), c("a", 1)}, []cand{f("a", 4), f("a", 2), f("b", 8)}, 0.5, 0.5,
			[]cand{c("a", 0.5*1+0.5*0.5), c("b", 0.5*0.5+0.5)}},
		{"ties keep the semantic order, then the full-text order", []cand{c("b", 1), c("a", 1)}, []cand{f("y", 1), f("x", 1)}, 1, 1,
			[]cand{c("y", 1), c("x", 1), c("b", 0.5), c("a", 0.5)}},
		{"no semantic candidates", nil, []cand{f("x", 1), f("w", 0.5)}, 0.7, 0.3, []cand{c("x", 0.3), c("w", 0.15)}},
		{"negative weights count as 0", []cand{c("a", 1)}, []cand{f("x", 3)}, -1, 1, []cand{c("x", 1), c("a", 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fuseScores(tt.sem, tt.ft, tt.vw, tt.kw)
			sortCands(got)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i].segment != tt.want[i].segment || math.Abs(got[i].score-tt.want[i].score) > 1e-12 {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}
