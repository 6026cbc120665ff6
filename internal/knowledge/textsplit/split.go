package textsplit

import (
	"sort"
	"strings"
	"unicode/utf8"

	"appkb/internal/llm"
)

// Chunk is one piece of a document.
type Chunk struct {
	Content string
	// Tokens is the cl100k token count of Content: exact, except for a
	// full-doc parent with runs of over a kilobyte without white space,
	// where it is close (see countLong).
	Tokens   int
	Position int // 1-based, in document order; children count within their parent
	Children []Chunk
}

// Split cuts cleaned text into chunks: for hierarchical mode parents with
// children, otherwise a flat list. It returns nil for blank text.
func (c Config) Split(text string) []Chunk {
	if c.Mode != ModeHierarchical {
		return c.Segment.Split(text)
	}
	var parents []Chunk
	if c.ParentMode == ParentFullDoc {
		t := strings.TrimSpace(text)
		if t == "" {
			return nil
		}
		parents = []Chunk{{Content: t, Tokens: countLong(t), Position: 1}}
	} else {
		parents = c.Segment.Split(text)
	}
	for i := range parents {
		parents[i].Children = c.Child.Split(parents[i].Content)
	}
	return parents
}

// Splitter cuts text into chunks of at most MaxTokens tokens.
//
// When Separator is set, the text is first cut at each occurrence of it; the
// separator is dropped and no chunk spans two of the pieces. Each piece is
// then split on its own:
//
//  1. A piece of at most MaxTokens tokens (after trimming white space) is
//     one chunk; a blank piece gives none.
//  2. A longer piece is broken into units that are as large as fit: at
//     paragraph breaks (a blank line) if it has any, else at line breaks,
//     else after sentences (". ", "! ", "? ", "。", "！", "？"), else after
//     clauses (", ", "; ", ": ", "，", "；", "：", "、"), else between words,
//     else between characters — each part still too long is broken the same
//     way at the next kind of place in that list. A delimiter stays with the
//     text before it.
//  3. Units are packed in order into chunks as large as fit within
//     MaxTokens. A chunk after the first repeats the end of the previous
//     one: at most Overlap tokens, starting at a word or a stronger place
//     (the strongest within reach, the earliest among equals: a paragraph,
//     line or sentence start is preferred to a word). Overlap is shortened or
//     dropped when it would keep the next unit out of the next chunk.
//
// Each chunk's content is a trimmed, non-empty substring of the text.
// Tokens is its exact cl100k count. The size rule: every chunk has at most
// MaxTokens tokens, with one exception — a chunk that is a single character
// whose encoding alone takes more tokens than MaxTokens (possible only when
// MaxTokens is below 4). Text is never cut inside a character.
//
// MaxTokens below 1 counts as 1; Overlap is clamped to 0..MaxTokens-1.
//
// Counting tokens is the expensive part, so each unit is counted once and
// chunk counts are sums: the places where units meet are chosen (before a
// space that follows a non-space, after a line break before a non-space)
// so that cl100k's pre-tokenizer never joins text across them, which makes
// counts add up exactly. Where units meet elsewhere (after "。" and the like,
// inside very long words, between characters) the chunk is counted whole.
type Splitter struct {
	Separator string
	MaxTokens int
	Overlap   int
}

// maxUnitBytes bounds the length of a unit. A longer run without a place to
// cut (a long URL, base64 data, unspaced text) is cut every maxUnitBytes
// bytes, since the tokenizer's cost grows with the square of a word's length.
const maxUnitBytes = 128

// Strength of the place where a unit meets the one before it: the higher,
// the better a place to end a chunk.
const (
	cutChar      = 0 // inside a word (forced)
	cutWord      = 2
	cutClause    = 3
	cutSentence  = 4
	cutLine      = 5
	cutParagraph = 6
)

// Split cuts text into chunks numbered from 1.
func (s Splitter) Split(text string) []Chunk {
	spans := s.spans(text)
	out := make([]Chunk, len(spans))
	for i, sp := range spans {
		out[i] = Chunk{Content: text[sp.start:sp.end], Tokens: sp.tokens, Position: i + 1}
	}
	return out
}

// spans returns the chunks of text as byte ranges of it.
func (s Splitter) spans(text string) []span {
	s.MaxTokens = max(s.MaxTokens, 1)
	s.Overlap = min(max(s.Overlap, 0), s.MaxTokens-1)
	var out []span
	offset := 0
	for {
		end := len(text)
		if s.Separator != "" {
			if k := strings.Index(text[offset:], s.Separator); k >= 0 {
				end = offset + k
			}
		}
		for _, sp := range s.splitPiece(text[offset:end]) {
			out = append(out, span{offset + sp.start, offset + sp.end, sp.tokens})
		}
		if end == len(text) {
			return out
		}
		offset = end + len(s.Separator)
	}
}

// span is a byte range of the text being split with its token count.
type span struct {
	start, end int
	tokens     int
}

// unit is a range of the piece between two places where it may be cut.
// Units cover the trimmed piece without gaps.
type unit struct {
	start, end int
	tokens     int  // of text[start:end]
	safe       bool // counts add up across the join with the previous unit
	strength   int  // of the join with the previous unit
	// Counts of the unit with white space trimmed on the left, on the right
	// and on both sides; -1 until needed.
	left, right, both int
}

// piece holds the state of splitting one piece.
type piece struct {
	text           string
	limit, overlap int
	units          []unit
	prefix         []int // prefix[k]: sum of tokens of units before k
	unsafeBefore   []int // unsafeBefore[k]: unsafe joins among units 1..k-1
	atomEnd        []bool
	atomEnds       []int
}

func (s Splitter) splitPiece(text string) []span {
	start, end := trimSpan(text, 0, len(text))
	if start == end {
		return nil
	}
	if n := countFast(text[start:end], s.MaxTokens); n <= s.MaxTokens {
		return []span{{start, end, n}}
	}
	p := &piece{text: text, limit: s.MaxTokens, overlap: s.Overlap}
	p.makeUnits(start, end)
	p.makeAtoms()
	return p.pack()
}

// countFast counts t unless it is obviously more than limit tokens, or
// holds a run of over maxUnitBytes bytes without white space (which the
// tokenizer would take quadratic time over): then it returns limit+1 and the
// piece is cut into units, which are cheap to count. A token holds at most a
// few dozen bytes of ordinary text, so a text of over 64 bytes per allowed
// token surely does not fit.
func countFast(t string, limit int) int {
	if len(t) > 64*limit+1024 || hasLongRun(t, maxUnitBytes) {
		return limit + 1
	}
	return llm.CountTokens(t)
}

// longRunBytes is the length of a run without white space above which
// countLong counts the run in pieces.
const longRunBytes = 1024

// countLong counts the tokens of a text of any length. The tokenizer takes
// time quadratic in the length of a word, so runs of more than longRunBytes
// bytes without white space (base64 data, unspaced text) are counted in
// pieces of that size; the result is then close to, not exactly, the count
// of the whole. Other text is counted exactly.
func countLong(t string) int {
	if !hasLongRun(t, longRunBytes) {
		return llm.CountTokens(t)
	}
	total, from, run := 0, 0, 0
	for i, r := range t {
		if isSpace(r) {
			run = 0
			continue
		}
		if run+utf8.RuneLen(r) > longRunBytes {
			total += llm.CountTokens(t[from:i])
			from, run = i, 0
		}
		run += utf8.RuneLen(r)
	}
	return total + llm.CountTokens(t[from:])
}

// hasLongRun reports whether t has more than n bytes in a row without white
// space.
func hasLongRun(t string, n int) bool {
	run := 0
	for _, r := range t {
		if isSpace(r) {
			run = 0
			continue
		}
		run += utf8.RuneLen(r)
		if run > n {
			return true
		}
	}
	return false
}

// makeUnits cuts text[start:end] into units and counts them.
func (p *piece) makeUnits(start, end int) {
	text := p.text
	type cut struct {
		pos  int
		safe bool
	}
	var cuts []cut
	prev, _ := utf8.DecodeRuneInString(text[start:])
	for i := start + utf8.RuneLen(prev); i < end; {
		r, size := utf8.DecodeRuneInString(text[i:end])
		switch {
		case r == ' ' && !isSpace(prev), prev == '\n' && !isSpace(r):
			cuts = append(cuts, cut{pos: i, safe: true})
		case isCJKStop(prev) && !isSpace(r):
			cuts = append(cuts, cut{pos: i})
		}
		prev = r
		i += size
	}
	// Drop cuts that would make a unit of white space only: the white space
	// joins the unit before.
	kept := cuts[:0]
	for k, c := range cuts {
		next := end
		if k+1 < len(cuts) {
			next = cuts[k+1].pos
		}
		if strings.TrimSpace(text[c.pos:next]) == "" {
			continue
		}
		kept = append(kept, c)
	}
	cuts = kept

	add := func(s, e int, safe bool) {
		u := unit{start: s, end: e, safe: safe, left: -1, right: -1, both: -1}
		u.tokens = llm.CountTokens(text[s:e])
		if u.tokens > p.limit && e-s > 1 {
			// Only with a very small limit: cut between characters.
			for k, r := range runeRuns(text, s, e, p.limit, false) {
				p.units = append(p.units, unit{start: r.start, end: r.end, tokens: r.tokens, safe: safe && k == 0, left: -1, right: -1, both: -1})
			}
			return
		}
		p.units = append(p.units, u)
	}
	from, safe := start, true
	for k := 0; k <= len(cuts); k++ {
		to := end
		if k < len(cuts) {
			to = cuts[k].pos
		}
		// Cut runs that are too long to count cheaply.
		for to-from > maxUnitBytes {
			c := from + maxUnitBytes
			for c > from && !utf8.RuneStart(text[c]) {
				c--
			}
			add(from, c, safe)
			from, safe = c, false
		}
		add(from, to, safe)
		if k < len(cuts) {
			from, safe = to, cuts[k].safe
		}
	}
	p.units[0].safe = true

	p.prefix = make([]int, len(p.units)+1)
	p.unsafeBefore = make([]int, len(p.units)+1)
	for k := range p.units {
		u := &p.units[k]
		p.prefix[k+1] = p.prefix[k] + u.tokens
		p.unsafeBefore[k+1] = p.unsafeBefore[k]
		if k > 0 {
			if !u.safe {
				p.unsafeBefore[k+1]++
			}
			u.strength = p.joinStrength(k)
		}
	}
}

// joinStrength classifies the place where unit k meets unit k-1.
func (p *piece) joinStrength(k int) int {
	text := p.text
	prev, cur := p.units[k-1], p.units[k]
	contentEnd := prev.start + len(strings.TrimRightFunc(text[prev.start:prev.end], isSpace))
	contentStart := cur.end - len(strings.TrimLeftFunc(text[cur.start:cur.end], isSpace))
	if contentEnd <= prev.start || contentStart >= cur.end {
		return cutWord
	}
	gap := text[contentEnd:contentStart]
	switch strings.Count(gap, "\n") {
	case 0:
	case 1:
		return cutLine
	default:
		return cutParagraph
	}
	last, _ := utf8.DecodeLastRuneInString(text[prev.start:contentEnd])
	switch {
	case strings.ContainsRune("。！？", last), gap != "" && strings.ContainsRune(".!?", last):
		return cutSentence
	case strings.ContainsRune("，；：、", last), gap != "" && strings.ContainsRune(",;:", last):
		return cutClause
	case gap != "":
		return cutWord
	}
	return cutChar
}

func isCJKStop(r rune) bool { return strings.ContainsRune("。！？，；：、", r) }

// est is the sum of the tokens of units i..j.
func (p *piece) est(i, j int) int { return p.prefix[j+1] - p.prefix[i] }

// makeAtoms marks where units may end a chunk: a run of units that fits in
// the limit by estimate is kept together; a longer run is broken at its
// strongest joins, recursively (see Splitter, step 2).
func (p *piece) makeAtoms() {
	p.atomEnd = make([]bool, len(p.units))
	var split func(a, b int)
	split = func(a, b int) {
		if a == b || p.est(a, b) <= p.limit {
			p.atomEnd[b] = true
			return
		}
		best := -1
		for k := a + 1; k <= b; k++ {
			best = max(best, p.units[k].strength)
		}
		from := a
		for k := a + 1; k <= b; k++ {
			if p.units[k].strength == best {
				split(from, k-1)
				from = k
			}
		}
		split(from, b)
	}
	split(0, len(p.units)-1)
	for k, end := range p.atomEnd {
		if end {
			p.atomEnds = append(p.atomEnds, k)
		}
	}
}

// unitCount returns the tokens of unit k trimmed on the left, the right or
// both sides, counting it the first time.
func (p *piece) unitCount(k int, left, right bool) int {
	u := &p.units[k]
	var slot *int
	switch {
	case left && right:
		slot = &u.both
	case left:
		slot = &u.left
	case right:
		slot = &u.right
	default:
		return u.tokens
	}
	if *slot < 0 {
		t := p.text[u.start:u.end]
		if left {
			t = strings.TrimLeftFunc(t, isSpace)
		}
		if right {
			t = strings.TrimRightFunc(t, isSpace)
		}
		*slot = llm.CountTokens(t)
	}
	return *slot
}

// chunk returns the trimmed span of units i..j with its exact token count.
func (p *piece) chunk(i, j int) span {
	s, e := trimSpan(p.text, p.units[i].start, p.units[j].end)
	var n int
	switch {
	case i == j:
		n = p.unitCount(i, true, true)
	case p.unsafeBefore[j+1]-p.unsafeBefore[i+1] == 0:
		n = p.unitCount(i, true, false) + p.est(i+1, j-1) + p.unitCount(j, false, true)
	default:
		n = llm.CountTokens(p.text[s:e])
	}
	return span{s, e, n}
}

func (p *piece) fits(i, j int) bool { return p.chunk(i, j).tokens <= p.limit }

// pack fills chunks (see Splitter, step 3).
func (p *piece) pack() []span {
	var out []span
	n := len(p.units)
	// Units of white space only (left by cuts between characters) never
	// start a chunk and never count as its new content.
	blank := make([]bool, n)
	lastContent := -1
	for k, u := range p.units {
		blank[k] = strings.TrimSpace(p.text[u.start:u.end]) == ""
		if !blank[k] {
			lastContent = k
		}
	}
	nextContent := func(k int) int {
		for k < n && blank[k] {
			k++
		}
		return k
	}
	i, minEnd := nextContent(0), nextContent(0) // the next chunk starts at unit i and ends at or after minEnd
	for i <= lastContent {
		j := p.bestEnd(i, minEnd)
		if j < 0 {
			// Unit i alone is too long once trimmed (only with a tiny
			// limit): cut it between characters.
			s, e := trimSpan(p.text, p.units[i].start, p.units[i].end)
			out = append(out, runeRuns(p.text, s, e, p.limit, true)...)
			i = nextContent(i + 1)
			minEnd = i
			continue
		}
		if c := p.chunk(i, j); c.start < c.end {
			out = append(out, c)
		}
		if j >= lastContent {
			break
		}
		minEnd = nextContent(j + 1)
		i = nextContent(p.overlapStart(i, j, minEnd))
	}
	return out
}

// bestEnd returns the last unit of the chunk that starts at unit i: the
// furthest atom end at or after minEnd that fits, else the furthest unit
// inside the first atom that fits, else -1.
func (p *piece) bestEnd(i, minEnd int) int {
	first := sort.SearchInts(p.atomEnds, minEnd)
	ends := p.atomEnds[first:]
	// By estimate, then checked exactly.
	m := max(sort.Search(len(ends), func(k int) bool { return p.est(i, ends[k]) > p.limit })-1, 0)
	if p.fits(i, ends[m]) {
		if m+1 < len(ends) && p.unsafeBefore[ends[m+1]+1]-p.unsafeBefore[i+1] > 0 {
			// Across unsafe joins the estimate is often pessimistic: try
			// further ends, galloping then binary search, counting exactly.
			lo, step, hi := m, 1, len(ends)
			for lo+step < len(ends) {
				if !p.fits(i, ends[lo+step]) {
					hi = lo + step
					break
				}
				lo += step
				step *= 2
			}
			if k := sort.Search(hi-lo-1, func(d int) bool { return !p.fits(i, ends[lo+1+d]) }); k > 0 && p.fits(i, ends[lo+k]) {
				lo += k
			}
			m = lo
		}
		return ends[m]
	}
	if m = p.lastFitting(i, ends[:m]); m >= 0 {
		return ends[m]
	}
	// Not even the first atom fits: cut inside it.
	units := make([]int, 0, ends[0]-minEnd)
	for u := minEnd; u < ends[0]; u++ {
		units = append(units, u)
	}
	if m = p.lastFitting(i, units); m >= 0 {
		return units[m]
	}
	return -1
}

// lastFitting returns the index in ends of the furthest end e such that
// units i..e fit, or -1. Counts grow with length almost always, so binary
// search finds it; the result is checked and, if need be, walked back.
func (p *piece) lastFitting(i int, ends []int) int {
	m := sort.Search(len(ends), func(k int) bool { return !p.fits(i, ends[k]) }) - 1
	for ; m >= 0; m-- {
		if p.fits(i, ends[m]) {
			return m
		}
	}
	return -1
}

// overlapStart returns the first unit of the chunk after units i..j: of the
// units after i whose run to j has at most overlap tokens by estimate, the
// one after the strongest join (the earliest among equals), provided it
// starts at least a word; then moved forward as long as the next chunk could
// not take the whole next atom (or at least the next unit).
func (p *piece) overlapStart(i, j, minEnd int) int {
	next, strength := j+1, cutWord-1
	for k := j; k > i && p.est(k, j) <= p.overlap; k-- {
		if s := p.units[k].strength; s >= strength {
			next, strength = k, s
		}
	}
	nextAtom := p.atomEnds[sort.SearchInts(p.atomEnds, minEnd)]
	for next <= j && !p.fits(next, nextAtom) {
		next++
	}
	return next
}

// runeRuns cuts text[start:end] into runs of whole characters, each the
// longest that fits in limit tokens (found by galloping, then binary search
// on the number of characters), or a single character that does not fit.
// With trim, runs are counted and returned trimmed and blank runs are
// dropped; without, the runs cover the text and are counted as they are.
func runeRuns(text string, start, end, limit int, trim bool) []span {
	var out []span
	bounds := func(s, e int) (int, int) {
		if trim {
			return trimSpan(text, s, e)
		}
		return s, e
	}
	for start < end {
		var ends []int // character ends after start
		for i := start; i < end && len(ends) < 64*limit; {
			_, size := utf8.DecodeRuneInString(text[i:end])
			i += size
			ends = append(ends, i)
		}
		count := func(k int) int { // tokens of the first k characters
			s, e := bounds(start, ends[k-1])
			return llm.CountTokens(text[s:e])
		}
		best := 1
		if count(1) <= limit {
			lo, step, hi := 1, 1, len(ends)+1
			for lo+step <= len(ends) {
				if count(lo+step) > limit {
					hi = lo + step
					break
				}
				lo += step
				step *= 2
			}
			best = lo
			if k := sort.Search(hi-lo-1, func(d int) bool { return count(lo+1+d) > limit }); k > 0 && count(lo+k) <= limit {
				best = lo + k
			}
		}
		cut := ends[best-1]
		if s, e := bounds(start, cut); s < e {
			out = append(out, span{s, e, llm.CountTokens(text[s:e])})
		}
		start = cut
	}
	return out
}

// trimSpan narrows [start, end) of text to exclude surrounding white space.
func trimSpan(text string, start, end int) (int, int) {
	t := text[start:end]
	l := strings.TrimLeftFunc(t, isSpace)
	start += len(t) - len(l)
	r := strings.TrimRightFunc(l, isSpace)
	return start, start + len(r)
}
