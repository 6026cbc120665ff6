package llm

import "strings"

// PorterStem is porterStem, for the full-text index of package retrieval,
// which must stem as SQLite's porter tokenizer does.
func PorterStem(word string) string { return porterStem(word) }

// porterStem is Porter's 1980 suffix-stripping algorithm for English, the
// one SQLite's porter tokenizer applies to full-text search. Words that
// are not made of at least three ASCII letters a-z are returned unchanged.
func porterStem(word string) string {
	if len(word) < 3 {
		return word
	}
	for i := 0; i < len(word); i++ {
		if word[i] < 'a' || word[i] > 'z' {
			return word
		}
	}
	w := []byte(word)
	w = stemStep1ab(w)
	if len(w) > 2 && w[len(w)-1] == 'y' && hasVowel(w[:len(w)-1]) {
		w[len(w)-1] = 'i' // step 1c
	}
	w = replaceFirst(w, 0, step2Rules)
	w = replaceFirst(w, 0, step3Rules)
	w = stemStep4(w)
	// Step 5.
	if n := len(w); n > 1 && w[n-1] == 'e' {
		if m := measure(w[:n-1]); m > 1 || (m == 1 && !endsCVC(w[:n-1])) {
			w = w[:n-1]
		}
	}
	if n := len(w); n > 1 && w[n-1] == 'l' && w[n-2] == 'l' && measure(w) > 1 {
		w = w[:n-1]
	}
	return string(w)
}

// consonant tells whether w[i] is a consonant: not a vowel, and a y only
// after a vowel (or at the start).
func consonant(w []byte, i int) bool {
	switch w[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !consonant(w, i-1)
	}
	return true
}

// measure is m in [C](VC)^m[V]: how many vowel-consonant runs w has.
func measure(w []byte) int {
	m, i, n := 0, 0, len(w)
	for i < n && consonant(w, i) {
		i++
	}
	for i < n {
		for i < n && !consonant(w, i) {
			i++
		}
		if i == n {
			break
		}
		for i < n && consonant(w, i) {
			i++
		}
		m++
	}
	return m
}

func hasVowel(w []byte) bool {
	for i := range w {
		if !consonant(w, i) {
			return true
		}
	}
	return false
}

// endsDouble tells whether w ends with two equal consonants.
func endsDouble(w []byte) bool {
	n := len(w)
	return n > 1 && w[n-1] == w[n-2] && consonant(w, n-1)
}

// endsCVC tells whether w ends consonant-vowel-consonant, the last not w,
// x or y (as in hop, but not in snow).
func endsCVC(w []byte) bool {
	n := len(w)
	if n < 3 || !consonant(w, n-3) || consonant(w, n-2) || !consonant(w, n-1) {
		return false
	}
	c := w[n-1]
	return c != 'w' && c != 'x' && c != 'y'
}

func stemStep1ab(w []byte) []byte {
	s := string(w)
	switch {
	case strings.HasSuffix(s, "sses"), strings.HasSuffix(s, "ies"):
		w = w[:len(w)-2]
	case strings.HasSuffix(s, "ss"):
	case strings.HasSuffix(s, "s"):
		w = w[:len(w)-1]
	}
	s = string(w)
	if strings.HasSuffix(s, "eed") {
		if measure(w[:len(w)-3]) > 0 {
			w = w[:len(w)-1]
		}
		return w
	}
	var stem []byte
	switch {
	case strings.HasSuffix(s, "ed") && hasVowel(w[:len(w)-2]):
		stem = w[:len(w)-2]
	case strings.HasSuffix(s, "ing") && hasVowel(w[:len(w)-3]):
		stem = w[:len(w)-3]
	default:
		return w
	}
	s = string(stem)
	switch {
	case strings.HasSuffix(s, "at"), strings.HasSuffix(s, "bl"), strings.HasSuffix(s, "iz"):
		return append(stem, 'e')
	case endsDouble(stem):
		if c := stem[len(stem)-1]; c != 'l' && c != 's' && c != 'z' {
			return stem[:len(stem)-1]
		}
	case measure(stem) == 1 && endsCVC(stem):
		return append(stem, 'e')
	}
	return stem
}

// stemRule replaces suffix by repl when the stem before it has a measure
// above the step's minimum.
type stemRule struct{ suffix, repl string }

var step2Rules = []stemRule{
	{"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"}, {"anci", "ance"},
	{"izer", "ize"}, {"bli", "ble"}, {"alli", "al"}, {"entli", "ent"}, {"eli", "e"},
	{"ousli", "ous"}, {"ization", "ize"}, {"ation", "ate"}, {"ator", "ate"},
	{"alism", "al"}, {"iveness", "ive"}, {"fulness", "ful"}, {"ousness", "ous"},
	{"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"}, {"logi", "log"},
}

var step3Rules = []stemRule{
	{"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"},
	{"ical", "ic"}, {"ful", ""}, {"ness", ""},
}

// replaceFirst applies the rule with the longest suffix of w (whether or
// not its condition, a stem measure above minM, holds).
func replaceFirst(w []byte, minM int, rules []stemRule) []byte {
	s := string(w)
	best := -1
	for i, r := range rules {
		if strings.HasSuffix(s, r.suffix) && (best < 0 || len(r.suffix) > len(rules[best].suffix)) {
			best = i
		}
	}
	if best < 0 {
		return w
	}
	r := rules[best]
	stem := w[:len(w)-len(r.suffix)]
	if measure(stem) <= minM {
		return w
	}
	return append(stem, r.repl...)
}

var step4Suffixes = []string{"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement",
	"ment", "ent", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize"}

func stemStep4(w []byte) []byte {
	s := string(w)
	best := ""
	for _, suf := range step4Suffixes {
		if strings.HasSuffix(s, suf) && len(suf) > len(best) {
			best = suf
		}
	}
	if best == "" {
		return w
	}
	stem := w[:len(w)-len(best)]
	if measure(stem) <= 1 {
		return w
	}
	if best == "ion" {
		if c := stem[len(stem)-1]; c != 's' && c != 't' {
			return w
		}
	}
	return stem
}
