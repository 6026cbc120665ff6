package retrieval

import (
	"math"
	"testing"
)

// TestFuseScores checks the weighted sum of fuseScores on small lists: the
// weights, the floor for chunks the semantic side did not keep, negative
// cosines, chunks found twice on one side and the tie order.
func TestFuseScores(t *testing.T) {
	c := func(seg string, score float64) cand { return cand{segment: seg, score: score} }
	tests := []struct {
		name    string
		sem, ft []cand
		vw, kw  float64
		want    []cand // in order
	}{
		{"Dify's default weights", []cand{c("a", 0.8), c("b", 0.4)}, []cand{c("b", 0.9)}, 0.7, 0.3,
			[]cand{c("a", 0.7*0.8), c("b", 0.7*0.4+0.3*0.9)}},
		{"weights need not add up to 1", []cand{c("a", 0.8), c("b", 0.4)}, []cand{c("b", 0.9)}, 1.4, 0.6,
			[]cand{c("a", 0.7*0.8), c("b", 0.7*0.4+0.3*0.9)}},
		{"keyword only", []cand{c("a", 0.8), c("b", 0.4)}, []cand{c("b", 0.9)}, 0, 1,
			[]cand{c("b", 0.9), c("a", 0)}},
		{"full-text only chunks take the lowest cosine kept", []cand{c("a", 0.5), c("b", 0.2)}, []cand{c("z", 0.6)}, 0.5, 0.5,
			[]cand{c("z", 0.5*0.2+0.5*0.6), c("a", 0.25), c("b", 0.1)}},
		{"negative cosines count as 0", []cand{c("a", 0.3), c("b", -0.2)}, []cand{c("b", 0.4), c("z", 0.4)}, 0.5, 0.5,
			[]cand{c("b", 0.2), c("z", 0.2), c("a", 0.15)}},
		{"a chunk found twice counts once with its best score", []cand{c("a", 0.3), c("a", 0.6)}, []cand{c("a", 0.2), c("a", 0.5)}, 0.5, 0.5,
			[]cand{c("a", 0.55)}},
		{"ties keep the semantic order, then the full-text order", []cand{c("b", 0.5), c("a", 0.5)}, []cand{c("y", 0.5), c("x", 0.5)}, 1, 1,
			[]cand{c("y", 0.5), c("x", 0.5), c("b", 0.25), c("a", 0.25)}},
		{"no semantic candidates", nil, []cand{c("x", 0.5)}, 0.7, 0.3, []cand{c("x", 0.15)}},
		{"negative weights count as 0", []cand{c("a", 0.5)}, []cand{c("x", 0.5)}, -1, 1, []cand{c("x", 0.5), c("a", 0)}},
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
