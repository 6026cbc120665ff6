package textsplit

import (
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeparators = []string{"", "\n\n", "\n", "###", " ", "。"}

// FuzzSplit checks the Splitter rules (see checkSpans) on any text, limit,
// overlap and separator: no panic, no empty chunk, exact token counts, no
// chunk over the limit except a single character that alone exceeds it, and
// every non-space character outside the separators in some chunk.
func FuzzSplit(f *testing.F) {
	f.Add("Hello world. This is a test.\n\nSecond paragraph here.", 5, 2, uint8(0))
	f.Add(doc(3, 4), 40, 10, uint8(1))
	f.Add(strings.Repeat("知识库把文档切分成片段，每个片段都会被索引。", 5), 12, 3, uint8(0))
	f.Add("a  \n \n b\t\tc \u00a0 d\r\ne", 1, 0, uint8(2))
	f.Add(strings.Repeat("x", 700)+" "+strings.Repeat("=", 300), 7, 3, uint8(0))
	f.Add("🙂🙂🙂 e\u0301e\u0301 '''s don't", 1, 0, uint8(4))
	f.Add("one###two######three###", 3, 1, uint8(3))
	f.Fuzz(func(t *testing.T, text string, maxTokens, overlap int, sep uint8) {
		if len(text) > 20000 {
			return
		}
		s := Splitter{
			Separator: fuzzSeparators[int(sep)%len(fuzzSeparators)],
			MaxTokens: 1 + abs(maxTokens)%120,
			Overlap:   abs(overlap) % 60,
		}
		spans := s.spans(text)
		checkSpans(t, s, text, spans)
		if s.Overlap == 0 {
			for k := 0; k+1 < len(spans); k++ {
				if overlapOf(spans, k) > 0 {
					t.Fatalf("overlap without Overlap between chunks %d and %d", k+1, k+2)
				}
			}
		}
	})
}

// FuzzProcess runs cleaning, hierarchical splitting and keyword extraction
// on any text.
func FuzzProcess(f *testing.F) {
	f.Add("Mail a@b.co or see [docs](http://x.y/z) now.\n\n\n\nNext  para.", true, true, false, 60, 50)
	f.Add(doc(4, 3), false, false, true, 80, 50)
	f.Fuzz(func(t *testing.T, text string, spaces, urls, fullDoc bool, parentMax, childMax int) {
		if len(text) > 20000 {
			return
		}
		c := Config{
			Mode:              ModeHierarchical,
			ParentMode:        ParentParagraph,
			RemoveExtraSpaces: spaces,
			RemoveURLsEmails:  urls,
			Segment:           Splitter{Separator: "\n\n", MaxTokens: 1 + abs(parentMax)%200},
			Child:             Splitter{Separator: "\n", MaxTokens: 1 + abs(childMax)%100, Overlap: 2},
		}
		if fullDoc {
			c.ParentMode = ParentFullDoc
		}
		cleaned := c.Clean(text)
		if !utf8.ValidString(cleaned) || strings.ContainsRune(cleaned, '\r') {
			t.Fatalf("cleaned text: %q", cleaned)
		}
		parents := c.Split(cleaned)
		if !fullDoc {
			checkChunks(t, c.Segment, cleaned, parents)
		} else if len(parents) > 1 {
			t.Fatalf("full-doc gave %d parents", len(parents))
		}
		for _, p := range parents {
			if p.Content == "" || len(p.Children) == 0 {
				t.Fatalf("parent %d: %q with %d children", p.Position, p.Content, len(p.Children))
			}
			checkChunks(t, c.Child, p.Content, p.Children)
		}
		kw := Keywords(text, 5)
		seen := map[string]bool{}
		for _, k := range kw {
			if k == "" || seen[k] || stopWords[k] {
				t.Fatalf("keywords %q", kw)
			}
			seen[k] = true
		}
		if len(kw) > 5 {
			t.Fatalf("%d keywords", len(kw))
		}
	})
}

func abs(n int) int {
	if n < 0 {
		if n == -n { // the most negative int
			return 0
		}
		return -n
	}
	return n
}
