package llm

import (
	"strings"
	"unicode"
)

// stopwords are frequent English words that carry no topic; they are left
// out of lexical overlap so that "what is the X" matches on X.
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be but by can could did do does for from had has have
		how i if in into is it its me my of on or our so than that the their them then there these they this
		to us was we were what when where which who whom why will with would you your`) {
		stopwords[w] = true
	}
}

// isIdeograph reports runes of scripts written without spaces; each one is
// taken as a term of its own.
func isIdeograph(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Thai)
}

// terms splits text into lower-case words (runs of letters and digits) and
// single ideographs, without stopwords, in order of appearance.
func terms(text string) []string {
	var out []string
	var word strings.Builder
	flush := func() {
		if word.Len() > 0 {
			if w := word.String(); !stopwords[w] {
				out = append(out, w)
			}
			word.Reset()
		}
	}
	for _, r := range text {
		switch {
		case isIdeograph(r):
			flush()
			out = append(out, string(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			word.WriteRune(unicode.ToLower(r))
		default:
			flush()
		}
	}
	flush()
	return out
}

// termSet returns the distinct terms of text.
func termSet(text string) map[string]bool {
	set := map[string]bool{}
	for _, t := range terms(text) {
		set[t] = true
	}
	return set
}

// sentenceEnds are the runes that close a sentence.
const sentenceEnds = ".!?。！？；;"

// sentences splits text into trimmed sentences. A sentence ends after one of
// sentenceEnds followed by white space (or, for the full-width marks, at
// once), and at every line break.
func sentences(text string) []string {
	var out []string
	runes := []rune(text)
	start := 0
	emit := func(end int) {
		if s := strings.TrimSpace(string(runes[start:end])); s != "" {
			out = append(out, s)
		}
		start = end
	}
	for i, r := range runes {
		switch {
		case r == '\n':
			emit(i + 1)
		case strings.ContainsRune(sentenceEnds, r):
			if r > unicode.MaxASCII || i+1 == len(runes) || unicode.IsSpace(runes[i+1]) {
				emit(i + 1)
			}
		}
	}
	emit(len(runes))
	return out
}

// wordChunks cuts text into pieces that each hold one word and the spaces
// after it; leading spaces join the first piece. The pieces concatenate to
// text exactly.
func wordChunks(text string) []string {
	var out []string
	start, seenWord, prevSpace := 0, false, false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if !space && prevSpace && seenWord {
			out = append(out, text[start:i])
			start = i
		}
		seenWord = seenWord || !space
		prevSpace = space
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}
