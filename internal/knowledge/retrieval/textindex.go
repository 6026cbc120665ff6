package retrieval

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"gorm.io/gorm"

	"appkb/internal/knowledge/textsplit"
	"appkb/internal/llm"
)

// The full-text ranking index: the chunk texts of a knowledge base kept in
// memory as postings per stemmed term, ranked with BM25 term by term.
//
// The SQL path (FTS5's bm25() on SQLite, ts_rank_cd on PostgreSQL) scores
// every chunk that matches any query term before it can order them; a
// query word found in a fifth of 50,000 chunks costs about 20 ms there. The
// index adds each term's contribution into an accumulator and keeps the
// best in a bounded heap, well under a millisecond for the same query.
//
// The index reproduces FTS5's ranking: the same tokens (unicode61 with
// diacritics removed, lower case, Porter stems; except that Chinese and
// Japanese, which FTS5 keeps as one token per run of characters, are cut
// into words, so that only the index finds them), the same BM25 (k1 1.2,
// b 0.75, FTS5's idf with its floor) and the same score order, so the
// strength it gives is the one fullTextScore expects from -bm25(). Its
// statistics (number of chunks, average length, chunks per term) are those
// of the knowledge base alone, where FTS5 counts every chunk of the table.
// On PostgreSQL it replaces ts_rank_cd with the same BM25, over the same
// tokens as on SQLite (no English stop words).
//
// An index is used only while the knowledge base's counter in
// chunk_text_versions (moved by triggers on every change to a chunk's text,
// enabled flag or place, migration 0024, in the transaction of the change)
// is no higher than it was when the index was read. Otherwise one read of
// the index starts in the background (single-flight per knowledge base);
// the search waits for it up to textWait, which covers small knowledge
// bases, and answers through SQL when it takes longer. On PostgreSQL that
// SQL answer ranks with ts_rank_cd, on another scale and with English stop
// words; on SQLite with one knowledge base it is the index's answer to the
// last bit. Whether a chunk may be returned is decided per search, from
// the enabled flag kept in the index and the documents the search allows
// (docSet), under the same conditions as the SQL path.

// textPosting is one chunk of a term's postings: its row in the index and
// how often the term occurs in it.
type textPosting struct {
	row, tf int32
}

// textIndex is the ranking index of one chunk table (chunks, or child
// chunks) of a knowledge base. Rows are in seq order, so that ties between
// equal scores go to the lower seq as in the SQL path. It is never
// modified once built.
type textIndex struct {
	ids     []string
	parents []string // child chunks: the chunk of each; nil for chunks
	seqs    []int64
	docOf   []int32 // index into docIDs, per row
	docIDs  []string
	enabled []bool
	// norm is, per row, BM25's length normalisation k1·(1 - b + b·len/avg).
	norm     []float64
	postings map[string][]textPosting
	size     int // number of postings
	children bool

	accs sync.Pool // of *textAcc sized for this index
	mask atomic.Pointer[textMask]
}

// textMask records, per entry of docIDs, whether searches with the shared
// set usable may return its chunks (see docMask).
type textMask struct {
	usable *usableSet
	ok     []bool
}

// textAcc is the per-search accumulator of an index: a score per row and
// the rows touched, to reset after.
type textAcc struct {
	score   []float64
	touched []int32
}

// textHit is a row of an index with its BM25 strength.
type textHit struct {
	row      int32
	strength float64
}

// foldCache keeps the folded form of non-ASCII runes (see foldRune).
var foldCache sync.Map // rune → rune

// foldRune lower-cases r and removes the diacritics of a Latin letter, as
// unicode61 with remove_diacritics 2 does; -1 drops it (a combining mark).
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	if v, ok := foldCache.Load(r); ok {
		return v.(rune)
	}
	f := unicode.ToLower(r)
	if unicode.Is(unicode.Mn, f) {
		f = -1
	} else {
		var buf [utf8.UTFMax]byte
		d := norm.NFD.Bytes(buf[:utf8.EncodeRune(buf[:], f)])
		base, n := utf8.DecodeRune(d)
		rest := true
		for _, m := range string(d[n:]) {
			if !unicode.Is(unicode.Mn, m) {
				rest = false
			}
		}
		// FTS5 folds Latin letters only: Greek and Cyrillic keep theirs.
		if rest && base != utf8.RuneError && unicode.Is(unicode.Latin, base) {
			f = base
		}
	}
	foldCache.Store(r, f)
	return f
}

// isTokenRune tells whether r belongs to a token (a letter, digit or
// combining mark); ftsTerms splits queries with it too, so queries and
// chunks split alike.
func isTokenRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// textWords calls emit with each word of text, split, lower-cased and
// without diacritics as the unicode61 tokenizer does, except that runs of
// Chinese or Japanese (written without spaces) are cut into words by
// textsplit.CJKWords rather than kept as one token. emit must not keep
// the slice.
func textWords(text string, emit func([]byte)) {
	var buf []byte
	var cjk []rune
	flushCJK := func() {
		if len(cjk) > 0 {
			textsplit.CJKWords(string(cjk), func(w string) { emit([]byte(w)) })
			cjk = cjk[:0]
		}
	}
	for _, r := range text {
		if r >= 0x2E80 && textsplit.IsCJK(r) {
			if len(buf) > 0 {
				emit(buf)
				buf = buf[:0]
			}
			cjk = append(cjk, r)
			continue
		}
		if !isTokenRune(r) {
			flushCJK()
			if len(buf) > 0 {
				emit(buf)
				buf = buf[:0]
			}
			continue
		}
		flushCJK()
		if f := foldRune(r); f >= 0 {
			buf = utf8.AppendRune(buf, f)
		}
	}
	flushCJK()
	if len(buf) > 0 {
		emit(buf)
	}
}

// hasCJK tells whether s holds a Chinese or Japanese character.
func hasCJK(s string) bool {
	for _, r := range s {
		if r >= 0x2E80 && textsplit.IsCJK(r) {
			return true
		}
	}
	return false
}

// textTokens calls emit with each token of text as the segments_fts
// tokenizer (porter unicode61 remove_diacritics 2) produces it: its words,
// stemmed.
func textTokens(text string, emit func(string)) {
	textWords(text, func(w []byte) { emit(llm.PorterStem(string(w))) })
}

// queryPhrases turns a query into the tokens of its terms, one per term of
// ftsQuery and in the same order: FTS5 scores each quoted term as its own
// phrase, so two words with one stem count twice there, and here.
func queryPhrases(query string) []string {
	var out []string
	for _, t := range ftsTerms(query) {
		if hasCJK(t) {
			out = append(out, t) // already a word of the index (see ftsTerms)
			continue
		}
		var toks []string
		textTokens(t, func(s string) { toks = append(toks, s) })
		if len(toks) == 1 {
			out = append(out, toks[0])
		}
	}
	return out
}

// BM25's parameters, as FTS5's bm25() uses them by default. They are
// variables so that the arithmetic is done in float64 at run time, in the
// order FTS5 does it, giving the same strengths to the last bit.
var (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// textBuilder reads one chunk table into a textIndex. Terms get numbers
// while it reads; the words met are kept with the number of their stem,
// since stemming is most of the cost of reading an index and a knowledge
// base has far fewer distinct words than tokens.
type textBuilder struct {
	x        *textIndex
	docIndex map[string]int32
	lengths  []int32
	total    int64
	words    map[string]int32 // word → term number
	termIDs  map[string]int32 // stem → term number
	terms    []string
	postings [][]textPosting // by term number
	row      []int32         // term numbers of the row being added
	max      int
}

func newTextBuilder(children bool, maxPostings int) *textBuilder {
	return &textBuilder{x: &textIndex{children: children}, docIndex: map[string]int32{},
		words: map[string]int32{}, termIDs: map[string]int32{}, max: maxPostings}
}

// errTextTooBig stops a build whose postings would pass the bound.
var errTextTooBig = fmt.Errorf("retrieval: the full-text index would be too large")

// term returns the number of a word's stem.
func (b *textBuilder) term(w []byte) int32 {
	if id, ok := b.words[string(w)]; ok {
		return id
	}
	word := string(w)
	st := llm.PorterStem(word)
	id, ok := b.termIDs[st]
	if !ok {
		id = int32(len(b.terms))
		b.termIDs[st] = id
		b.terms = append(b.terms, st)
		b.postings = append(b.postings, nil)
	}
	b.words[word] = id
	return id
}

// add appends a row.
func (b *textBuilder) add(seq int64, id, parent, doc string, enabled bool, content string) error {
	x := b.x
	row := int32(len(x.ids))
	b.row = b.row[:0]
	textWords(content, func(w []byte) { b.row = append(b.row, b.term(w)) })
	n := int32(len(b.row))
	slices.Sort(b.row)
	for i := 0; i < len(b.row); {
		j := i + 1
		for j < len(b.row) && b.row[j] == b.row[i] {
			j++
		}
		t := b.row[i]
		b.postings[t] = append(b.postings[t], textPosting{row: row, tf: int32(j - i)})
		x.size++
		i = j
	}
	if x.size > b.max {
		return errTextTooBig
	}
	di, ok := b.docIndex[doc]
	if !ok {
		di = int32(len(x.docIDs))
		b.docIndex[doc] = di
		x.docIDs = append(x.docIDs, doc)
	}
	x.ids = append(x.ids, id)
	if x.children {
		x.parents = append(x.parents, parent)
	}
	x.seqs = append(x.seqs, seq)
	x.docOf = append(x.docOf, di)
	x.enabled = append(x.enabled, enabled)
	b.lengths = append(b.lengths, n)
	b.total += int64(n)
	return nil
}

// finish computes the length normalisation and returns the index.
func (b *textBuilder) finish() *textIndex {
	x := b.x
	x.postings = make(map[string][]textPosting, len(b.terms))
	for i, t := range b.terms {
		x.postings[t] = b.postings[i]
	}
	x.norm = make([]float64, len(x.ids))
	if len(x.ids) > 0 {
		avg := float64(b.total) / float64(len(x.ids))
		for i, l := range b.lengths {
			x.norm[i] = bm25K1 * (1 - bm25B + bm25B*float64(l)/avg)
		}
	}
	n := len(x.ids)
	x.accs.New = func() any { return &textAcc{score: make([]float64, n)} }
	return x
}

// okFor tells, per entry of docIDs, whether docs allows chunks of it in
// this index: allowed documents that are parent-child ones for child
// chunks, other ones for chunks. With the shared set of usable documents
// the answer is kept for the next search with the same set.
func (x *textIndex) okFor(docs *docSet) []bool {
	if docs.shared != nil {
		if m := x.mask.Load(); m != nil && m.usable == docs.shared {
			return m.ok
		}
	}
	ok := make([]bool, len(x.docIDs))
	for i, id := range x.docIDs {
		ok[i] = docs.allowed[id] && docs.hierarchical(id) == x.children
	}
	if docs.shared != nil {
		x.mask.Store(&textMask{usable: docs.shared, ok: ok})
	}
	return ok
}

// rank returns the best limit rows matching any phrase whose chunks docs
// allows (and that are enabled), strongest first, ties by seq.
func (x *textIndex) rank(phrases []string, docs *docSet, limit int) []textHit {
	if len(x.ids) == 0 || limit <= 0 {
		return nil
	}
	acc := x.accs.Get().(*textAcc)
	defer func() {
		for _, r := range acc.touched {
			acc.score[r] = 0
		}
		acc.touched = acc.touched[:0]
		x.accs.Put(acc)
	}()
	n := len(x.ids)
	k1p1 := bm25K1 + 1.0
	for _, p := range phrases {
		ps := x.postings[p]
		if len(ps) == 0 {
			continue
		}
		idf := math.Log((float64(n-len(ps)) + 0.5) / (float64(len(ps)) + 0.5))
		if idf <= 0 {
			idf = 1e-6
		}
		for _, e := range ps {
			f := float64(e.tf)
			if acc.score[e.row] == 0 {
				acc.touched = append(acc.touched, e.row)
			}
			acc.score[e.row] += idf * (f * k1p1) / (f + x.norm[e.row])
		}
	}
	if len(acc.touched) == 0 {
		return nil
	}
	var ok []bool
	var memo []int8 // without the shared set: 1 allowed, 2 not, per document, as met
	if docs.shared != nil {
		ok = x.okFor(docs)
	} else {
		memo = make([]int8, len(x.docIDs))
	}
	h := make(scoreHeap, 0, min(limit, len(acc.touched)))
	for _, r := range acc.touched {
		e := scored{idx: int(r), ord: int(r), score: acc.score[r]}
		if len(h) >= limit && !e.better(h[0]) {
			continue
		}
		if !x.enabled[r] {
			continue
		}
		d := x.docOf[r]
		if ok != nil {
			if !ok[d] {
				continue
			}
		} else {
			if memo[d] == 0 {
				id := x.docIDs[d]
				memo[d] = 2
				if docs.allowed[id] && docs.hierarchical(id) == x.children {
					memo[d] = 1
				}
			}
			if memo[d] != 1 {
				continue
			}
		}
		if len(h) < limit {
			h.push(e)
		} else {
			h[0] = e
			h.down(0)
		}
	}
	out := make([]textHit, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		e := h.pop()
		out[i] = textHit{row: int32(e.idx), strength: e.score}
	}
	return out
}

// kbText is the ranking index of a knowledge base's chunks and child
// chunks as of version of its counter. tooBig marks a knowledge base whose
// index would pass the bound: its searches stay with SQL until it changes.
type kbText struct {
	version       int64
	chunks, child *textIndex
	tooBig        bool
	size          int
}

// textCache holds the ranking indexes of a Service's knowledge bases.
// Safe for concurrent use.
type textCache struct {
	mu       sync.Mutex
	byKB     map[string]*kbText
	total    int                      // postings held, over every index
	building map[string]*textRead     // reads running now
	next     map[string]time.Time     // when a knowledge base may be read again
	took     map[string]time.Duration // how long the last read of a knowledge base took
}

// Bounds of the cache: how many knowledge bases, and how many postings
// (about 8 bytes each, plus the per-chunk arrays) in one index and in all.
const (
	maxTextCached   = 64
	maxTextPostings = 16 << 20
	maxTextTotal    = 48 << 20
)

// textWait is how long a search waits for the read of an index that is
// missing or out of date before it answers through SQL instead. A small
// knowledge base is read well within it, so its searches always rank
// alike (on PostgreSQL the SQL path ranks with ts_rank_cd, on another
// scale); a large one is read in the background meanwhile.
const textWait = 30 * time.Millisecond

// textThrottle: a read that took longer than this makes the next read of
// the knowledge base wait three times as long as it took (see refresh).
const textThrottle = 20 * time.Millisecond

// current returns the index of a knowledge base if it is as of version or
// newer (counters only go up; an index read later holds every change the
// caller's reading of the counter saw).
func (c *textCache) current(datasetID string, version int64) *kbText {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kb := c.byKB[datasetID]; kb != nil && kb.version >= version {
		return kb
	}
	return nil
}

// put caches kb, dropping other entries while the bounds would be passed.
func (c *textCache) put(datasetID string, kb *kbText) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKB == nil {
		c.byKB = map[string]*kbText{}
	}
	if old := c.byKB[datasetID]; old != nil {
		c.total -= old.size
		delete(c.byKB, datasetID)
	}
	for k, v := range c.byKB {
		if len(c.byKB) < maxTextCached && c.total+kb.size <= maxTextTotal {
			break
		}
		c.total -= v.size
		delete(c.byKB, k)
	}
	c.byKB[datasetID] = kb
	c.total += kb.size
}

// textRead is a read of an index in progress.
type textRead struct {
	start time.Time
	done  chan struct{} // closed when the read is over
}

// refresh starts reading the index of a knowledge base in the background,
// unless a read of it is running, and returns the read; nil when no read
// may start yet. After a read that took
// long, the next waits three times as long as that one took, so that
// searches during a long run of writes (a large upload being indexed)
// spend at most a quarter of a core on reading indexes that are out of
// date again at once.
func (c *textCache) refresh(gdb *gorm.DB, datasetID string) *textRead {
	c.mu.Lock()
	if c.building == nil {
		c.building, c.next, c.took = map[string]*textRead{}, map[string]time.Time{}, map[string]time.Duration{}
	}
	if r := c.building[datasetID]; r != nil {
		c.mu.Unlock()
		return r
	}
	if time.Now().Before(c.next[datasetID]) {
		c.mu.Unlock()
		return nil
	}
	read := &textRead{start: time.Now(), done: make(chan struct{})}
	c.building[datasetID] = read
	c.mu.Unlock()
	go func() {
		start := read.start
		defer func() {
			if r := recover(); r != nil {
				slog.Error("retrieval: reading the full-text index failed", "dataset_id", datasetID, "panic", r)
			}
			c.mu.Lock()
			delete(c.building, datasetID)
			if len(c.next) > 1000 || len(c.took) > 1000 {
				clear(c.next)
				clear(c.took)
			}
			took := time.Since(start)
			c.took[datasetID] = took
			if took > textThrottle {
				c.next[datasetID] = time.Now().Add(3 * took)
			} else {
				delete(c.next, datasetID)
			}
			c.mu.Unlock()
			close(read.done)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		kb, err := readText(ctx, gdb, datasetID)
		if err != nil {
			slog.Warn("retrieval: reading the full-text index failed", "dataset_id", datasetID, "error", err)
			return
		}
		c.put(datasetID, kb)
		slog.Debug("retrieval: read the full-text index", "dataset_id", datasetID, "version", kb.version,
			"postings", kb.size, "too_big", kb.tooBig, "took", time.Since(start))
	}()
	return read
}

// textVersions reads the counters of the knowledge bases (0 for one that
// never had a chunk).
func textVersions(ctx context.Context, gdb *gorm.DB, datasets []string) (map[string]int64, error) {
	var rows []struct {
		DatasetID string
		Version   int64
	}
	err := gdb.WithContext(ctx).Raw(`SELECT dataset_id, version FROM chunk_text_versions WHERE dataset_id IN ?`, datasets).
		Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("full-text search: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.DatasetID] = r.Version
	}
	return out, nil
}

// readText reads the index of a knowledge base. The counter is read first:
// any change committed after it moves the counter past the version the
// index is labelled with, so an index never passes for newer than it is.
func readText(ctx context.Context, gdb *gorm.DB, datasetID string) (*kbText, error) {
	v, err := textVersions(ctx, gdb, []string{datasetID})
	if err != nil {
		return nil, err
	}
	kb := &kbText{version: v[datasetID]}
	limit := maxTextPostings
	read := func(children bool, query string) (*textIndex, error) {
		b := newTextBuilder(children, limit)
		rows, err := gdb.WithContext(ctx).Raw(query, datasetID).Rows()
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var seq int64
			var id, parent, doc, content string
			var enabled bool
			if err := rows.Scan(&seq, &id, &parent, &doc, &enabled, &content); err != nil {
				return nil, err
			}
			if err := b.add(seq, id, parent, doc, enabled, content); err != nil {
				return nil, err
			}
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return b.finish(), nil
	}
	kb.chunks, err = read(false, `SELECT seq, id, '' AS parent, document_id, enabled, content
		FROM segments WHERE dataset_id = ? ORDER BY seq`)
	if err == nil {
		limit -= kb.chunks.size
		kb.child, err = read(true, `SELECT seq, id, segment_id, document_id, TRUE AS enabled, content
			FROM child_chunks WHERE dataset_id = ? ORDER BY seq`)
	}
	if err == errTextTooBig {
		return &kbText{version: kb.version, tooBig: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the full-text index: %w", err)
	}
	kb.size = kb.chunks.size + kb.child.size + len(kb.chunks.ids) + len(kb.child.ids)
	return kb, nil
}

// indexedFullText is fullTextCandidates through the ranking indexes of the
// knowledge bases. ok is false when one of them is missing or out of date
// (its read is then started) or too large: the SQL path must answer.
//
// A missing or out-of-date index is waited for up to wait.
func (s *Service) indexedFullText(ctx context.Context, datasets []string, query string, docs *docSet, limit int, wait time.Duration) (out []cand, ok bool, err error) {
	phrases := queryPhrases(query)
	if len(phrases) == 0 {
		return nil, false, nil
	}
	versions, err := textVersions(ctx, s.db, datasets)
	if err != nil {
		return nil, false, err
	}
	kbs := make([]*kbText, 0, len(datasets))
	for _, d := range datasets {
		kb := s.text.current(d, versions[d])
		if kb == nil {
			if kb, err = s.awaitText(ctx, d, versions[d], wait); kb == nil || err != nil {
				return nil, false, err
			}
		}
		if kb.tooBig {
			return nil, false, nil
		}
		kbs = append(kbs, kb)
	}
	type ranked struct {
		x *textIndex
		textHit
	}
	best := func(pick func(*kbText) *textIndex) []ranked {
		var all []ranked
		for _, kb := range kbs {
			x := pick(kb)
			for _, h := range x.rank(phrases, docs, limit) {
				all = append(all, ranked{x, h})
			}
		}
		if len(kbs) > 1 {
			sort.Slice(all, func(i, j int) bool {
				a, b := all[i], all[j]
				if a.strength != b.strength {
					return a.strength > b.strength
				}
				return a.x.seqs[a.row] < b.x.seqs[b.row]
			})
			all = all[:min(len(all), limit)]
		}
		return all
	}
	for _, r := range best(func(kb *kbText) *textIndex { return kb.chunks }) {
		out = append(out, cand{segment: r.x.ids[r.row], score: fullTextScore(r.strength)})
	}
	if docs.anyHierarchical() {
		for _, r := range best(func(kb *kbText) *textIndex { return kb.child }) {
			out = append(out, cand{segment: r.x.parents[r.row], child: r.x.ids[r.row], score: fullTextScore(r.strength)})
		}
	}
	return out, true, nil
}

// awaitText starts (or joins) the read of a knowledge base's index and
// waits for it until wait after the read started; nil when it is not
// current by then. So the searches that come while a long read runs wait
// no more than wait between them all, and when the last read took longer
// than wait, none waits at all.
func (s *Service) awaitText(ctx context.Context, datasetID string, version int64, wait time.Duration) (*kbText, error) {
	read := s.text.refresh(s.db, datasetID)
	if read == nil || wait <= 0 || s.text.lastTook(datasetID) > wait {
		return nil, nil
	}
	left := time.Until(read.start.Add(wait))
	if left <= 0 {
		return nil, nil
	}
	timer := time.NewTimer(left)
	defer timer.Stop()
	select {
	case <-read.done:
	case <-timer.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.text.current(datasetID, version), nil
}

// lastTook is how long the last read of a knowledge base's index took (0
// if none is known).
func (c *textCache) lastTook(datasetID string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.took[datasetID]
}

// TextIndexReady reports whether full-text searches of the knowledge base
// rank with a current in-memory index; when not, it starts reading one
// (as a search would). Benchmarks wait for it to measure the steady state.
func (s *Service) TextIndexReady(ctx context.Context, datasetID string) bool {
	versions, err := textVersions(ctx, s.db, []string{datasetID})
	if err != nil {
		return false
	}
	if kb := s.text.current(datasetID, versions[datasetID]); kb != nil {
		return !kb.tooBig
	}
	s.text.refresh(s.db, datasetID)
	return false
}
