package retrieval

import (
	"fmt"
	"testing"
)

// BenchmarkTextIndexRank ranks a query whose two words each match a fifth
// of 50,000 two-sentence chunks (the load tool's corpus shape), through
// the index alone.
func BenchmarkTextIndexRank(b *testing.B) {
	topics := [][]string{
		{"honey", "bees", "hive", "queen", "flowers", "pollen", "dance", "colony"},
		{"volcanic", "ash", "magma", "eruption", "crust", "vent", "lava", "clouds"},
		{"green", "tea", "leaves", "brewing", "water", "steep", "oxidation", "cup"},
		{"bicycle", "chain", "oil", "tyre", "brakes", "wheel", "gear", "saddle"},
		{"sleep", "memory", "dreams", "night", "rest", "brain", "cycles", "nap"},
	}
	bld := newTextBuilder(false, maxTextPostings)
	docs := &docSet{allowed: map[string]bool{}}
	for i := range 50000 {
		w := topics[i%len(topics)]
		text := fmt.Sprintf("The %s and the %s of item %d are studied here. Notes on %s, %s and %s follow.",
			w[i%8], w[(i/5)%8], i, w[(i/7)%8], w[(i/11)%8], w[(i/13)%8])
		doc := fmt.Sprintf("doc%d", i)
		docs.allowed[doc] = true
		if err := bld.add(int64(i+1), fmt.Sprintf("seg%d", i), "", doc, true, text); err != nil {
			b.Fatal(err)
		}
	}
	x := bld.finish()
	phrases := queryPhrases("honey bees and flowers")
	if len(x.rank(phrases, docs, 10)) != 10 {
		b.Fatal("too few ranked")
	}
	b.ResetTimer()
	for range b.N {
		x.rank(phrases, docs, 116)
	}
}

// BenchmarkTextIndexBuild reads 50,000 two-sentence chunks into an index.
func BenchmarkTextIndexBuild(b *testing.B) {
	texts := make([]string, 50000)
	for i := range texts {
		texts[i] = fmt.Sprintf("The honey and the bees of item %d are studied here. Notes on flowers, pollen and dance follow.", i)
	}
	for range b.N {
		bld := newTextBuilder(false, maxTextPostings)
		for i, t := range texts {
			if err := bld.add(int64(i+1), "seg", "", "doc", true, t); err != nil {
				b.Fatal(err)
			}
		}
		bld.finish()
	}
}
