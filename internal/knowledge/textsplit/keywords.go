package textsplit

import (
	"sort"
	"strings"
	"unicode"
)

// stopWords are common English words that make poor keywords, with the
// pieces contractions leave behind ("don't" gives "don").
var stopWords = toSet(`a about above after again against all also am an and any are aren as at
be because been before being below between both but by can cannot could couldn
did didn do does doesn doing don down during each etc few for from further had hadn
has hasn have haven having he her here hers herself him himself his how however i if
in into is isn it its itself just ll me more most must mustn my myself no nor not now
of off on once only or other ought our ours ourselves out over own re same shall shan
she should shouldn so some such than that the their theirs them themselves then there
these they this those through to too under until up upon us ve very via was wasn we
were weren what when where which while who whom why will with won would wouldn yet you
your yours yourself yourselves`)

func toSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// Keywords returns up to n keywords of text for economy (keyword table)
// indexing, most frequent first; ties keep the order of first appearance.
//
// Terms are found this way: the text is lower-cased and cut into runs of
// letters and digits (anything else separates terms, so "don't" gives "don"
// and "t", and "gpt-4o" gives "gpt" and "4o"). Runs of Chinese characters
// and Japanese kana, which are written without spaces, are cut into words
// (CJKWords: "员工自行车停车场" gives 员工, 自行, 行车, 自行车, 停车, 车场,
// 停车场); of those, single characters, hiragana-only pieces (particles
// and endings) and common function words are dropped, but a Han character
// standing alone is kept. Other terms shorter
// than two characters and the English stop words are dropped.
//
// Retrieval uses the same function on the query, so both sides agree. It
// returns nil when n <= 0 or the text has no terms.
func Keywords(text string, n int) []string {
	if n <= 0 {
		return nil
	}
	count := map[string]int{}
	var order []string
	add := func(term string) {
		if count[term] == 0 {
			order = append(order, term)
		}
		count[term]++
	}
	forEachTerm(text, add)
	sort.SliceStable(order, func(i, j int) bool { return count[order[i]] > count[order[j]] })
	if len(order) > n {
		order = order[:n]
	}
	if len(order) == 0 {
		return nil
	}
	return order
}

// forEachTerm calls fn for each term of text, in order (see Keywords).
func forEachTerm(text string, fn func(string)) {
	var word []rune
	var cjk []rune
	flushWord := func() {
		if len(word) >= 2 {
			if w := string(word); !stopWords[w] {
				fn(w)
			}
		}
		word = word[:0]
	}
	flushCJK := func() {
		if len(cjk) == 0 {
			return
		}
		alone := len(cjk) == 1 && cjkClass(cjk[0]) == 1 // a lone Han character is a word
		CJKWords(string(cjk), func(w string) {
			if alone || keepCJK(w) {
				fn(w)
			}
		})
		cjk = cjk[:0]
	}
	for _, r := range text {
		switch {
		case isCJK(r):
			flushWord()
			cjk = append(cjk, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			flushCJK()
			word = append(word, unicode.ToLower(r))
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
}

func isCJK(r rune) bool { return IsCJK(r) }

// keepCJK tells whether a CJK word makes a keyword: two characters or
// more, not hiragana only, not a function word.
func keepCJK(w string) bool {
	n, kana := 0, true
	for _, r := range w {
		n++
		if cjkClass(r) != 2 {
			kana = false
		}
	}
	return n >= 2 && !kana && !cjkStopWords[w]
}
