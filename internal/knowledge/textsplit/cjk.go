package textsplit

import (
	"log/slog"
	"sync"
	"time"
	"unicode"

	"github.com/go-ego/gse"
)

// Chinese and Japanese are written without spaces between words, so a run
// of such text is cut into words here, the same way on the chunk side
// (full-text index, stored keywords) and on the query side.
//
// A run is first split where the script changes: Han characters, hiragana
// and katakana (with the long-vowel mark ー). In Japanese the change of
// script marks most word edges (東京駅|から|新幹線|で), so kana pieces are
// kept whole. Han pieces go through gse's dictionary segmenter (simplified
// Chinese dictionary, with HMM for unknown words) in its search mode, which
// also gives the shorter dictionary words inside a long one (自行车 gives
// 自行, 行车 and 自行车), so that 停车 in a query finds 停车场 in a chunk.
// Kanji compounds the Chinese dictionary does not know fall back to the
// HMM or to single characters and their pairs, alike on both sides.
//
// The dictionary costs about 1.5 s and 130 MB to load; it is loaded once,
// the first time Han text is seen, and never by processes that see none.
// (gse's Japanese dictionary would cost another 3.3 s and 340 MB; the
// script split covers Japanese well enough for retrieval.)

var zh struct {
	once sync.Once
	seg  *gse.Segmenter
}

// segmenter returns the Chinese segmenter, loading it on first use; nil if
// it cannot be loaded (Han pieces are then cut into single characters).
func segmenter() *gse.Segmenter {
	zh.once.Do(func() {
		start := time.Now()
		seg := &gse.Segmenter{SkipLog: true}
		if err := seg.LoadDict("zh_s"); err != nil {
			slog.Error("textsplit: loading the Chinese dictionary failed; Chinese is cut into characters", "error", err)
			return
		}
		zh.seg = seg
		slog.Info("textsplit: loaded the Chinese dictionary", "took", time.Since(start))
	})
	return zh.seg
}

// cjkClass is the script class of a rune for the split: 0 none, 1 Han, 2
// hiragana, 3 katakana.
func cjkClass(r rune) int {
	switch {
	case r == 'ー' || r == 'ｰ':
		return 3
	case unicode.Is(unicode.Han, r):
		return 1
	case unicode.Is(unicode.Hiragana, r):
		return 2
	case unicode.Is(unicode.Katakana, r):
		return 3
	}
	return 0
}

// IsCJK tells whether r is written without spaces between words (Han,
// hiragana, katakana).
func IsCJK(r rune) bool { return cjkClass(r) != 0 }

// CJKWords calls emit with the words of run, a string of CJK runes only
// (see IsCJK), in order; Han pieces give their dictionary words and the
// shorter words inside them.
func CJKWords(run string, emit func(string)) {
	rs := []rune(run)
	for i := 0; i < len(rs); {
		c := cjkClass(rs[i])
		j := i + 1
		for j < len(rs) && cjkClass(rs[j]) == c {
			j++
		}
		piece := string(rs[i:j])
		switch {
		case c != 1 || j-i == 1:
			emit(piece)
		default:
			var words []string
			if seg := segmenter(); seg != nil {
				words = seg.CutSearch(piece, true)
			} else {
				for _, r := range rs[i:j] {
					words = append(words, string(r))
				}
			}
			emitHan(words, emit)
		}
		i = j
	}
}

// emitHan emits the words of a Han piece, and for each stretch of two or
// more single characters (what the Chinese dictionary leaves of a word it
// does not know, such as many Japanese kanji compounds: 東京駅 gives 東,
// 京, 駅) also their overlapping pairs (東京, 京駅).
func emitHan(words []string, emit func(string)) {
	var singles []rune
	flush := func() {
		for k := 0; k+1 < len(singles); k++ {
			emit(string(singles[k : k+2]))
		}
		singles = singles[:0]
	}
	for _, w := range words {
		if w == "" {
			continue
		}
		emit(w)
		if r := []rune(w); len(r) == 1 {
			singles = append(singles, r[0])
			continue
		}
		flush()
	}
	flush()
}

// cjkStopWords are common Chinese and Japanese function words that make
// poor keywords (single characters are dropped anyway).
var cjkStopWords = toSet(`什么 怎么 怎样 如何 哪里 哪儿 哪些 哪个 为什么 多少 是否 可以 需要 我们 你们 他们 这个 那个 这些 那些
一个 没有 就是 还是 或者 以及 因为 所以 如果 但是 而且 已经 进行 通过 关于 对于 自己 时候 之后 之前
こと もの ため よう これ それ あれ どこ どれ なに 何 どう です ます でした ました する します した して
ある あり いる います なる なり ください という から まで より など ので のは には では とは`)
