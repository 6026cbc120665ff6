package llm

import (
	"appkb/internal/platform/apperr"

	"context"
	"math"
	"sort"
	"strings"
	"time"
	"unicode"
)

// builtinModelName is the model name the builtin backend reports when the
// app names none.
const builtinModelName = "builtin"

// BuiltinEmbeddingDimensions is the length of builtin embedding vectors.
const BuiltinEmbeddingDimensions = 256

// Fixed texts of the builtin chat model.
const (
	// builtinIntro starts the reply when no knowledge is given.
	builtinIntro = "I am appkb's built-in offline model: I can only quote the knowledge I am given, and this time there is none."
	// builtinNoMatch is the reply when knowledge is given but none of its
	// sentences shares a word with the question.
	builtinNoMatch = "I could not find an answer to that in the knowledge I was given."
	// builtinMaxSentences bounds an extractive answer.
	builtinMaxSentences = 3
)

// cancelled turns a done context into the package's error.
func cancelled(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return modelError(apperr.CodeCompletionRequestError, err, "The model request was cancelled.")
	}
	return nil
}

// builtinChat is the offline, deterministic chat model. When a request
// offers tools it calls them by the rule of builtinToolTurn.
type builtinChat struct {
	model string
	price *pricing
}

func (m *builtinChat) Chat(ctx context.Context, req ChatRequest) (*ChatResponse, error) {
	start := time.Now()
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	if call, answer, ok := builtinToolTurn(req); ok {
		return m.toolTurn(req, call, answer, start), nil
	}
	return m.respond(req, BuiltinAnswer(req), start), nil
}

// toolTurn is the response of a turn that calls a tool or answers from
// observations.
func (m *builtinChat) toolTurn(req ChatRequest, call *ToolCall, answer string, start time.Time) *ChatResponse {
	if call == nil {
		return m.respond(req, answer, start)
	}
	resp := m.respond(req, "", start)
	resp.ToolCalls = []ToolCall{*call}
	resp.FinishReason = "tool_calls"
	resp.Usage = makeUsage(m.price, CountMessages(req.Messages), CountTokens(call.Name+call.Arguments), time.Since(start))
	return resp
}

func (m *builtinChat) Stream(ctx context.Context, req ChatRequest, onChunk func(Chunk) error) (*ChatResponse, error) {
	start := time.Now()
	onChunk = orDiscard(onChunk)
	answer := ""
	call, toolAnswer, toolTurn := builtinToolTurn(req)
	switch {
	case toolTurn && call != nil:
		if err := cancelled(ctx); err != nil {
			return nil, err
		}
		if err := onChunk(Chunk{ToolCalls: []ToolCall{*call}}); err != nil {
			return nil, err
		}
		return m.toolTurn(req, call, "", start), nil
	case toolTurn:
		answer = toolAnswer
	default:
		answer = BuiltinAnswer(req)
	}
	for _, piece := range wordChunks(answer) {
		if err := cancelled(ctx); err != nil {
			return nil, err
		}
		if err := onChunk(Chunk{Delta: piece}); err != nil {
			return nil, err
		}
	}
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	return m.respond(req, answer, start), nil
}

func (m *builtinChat) respond(req ChatRequest, answer string, start time.Time) *ChatResponse {
	model := m.model
	if req.Model != "" {
		model = req.Model
	}
	return &ChatResponse{
		Model:        model,
		Content:      answer,
		FinishReason: "stop",
		Usage:        makeUsage(m.price, CountMessages(req.Messages), CountTokens(answer), time.Since(start)),
	}
}

// BuiltinAnswer is the reply of the builtin chat model to req; it depends on
// nothing else. The question is the content of the last user message.
//
// With Knowledge, the reply is made of the (at most three) knowledge
// sentences that share the most question words (compared by their stems;
// none that weighs less than half the best), weighted by how rare each
// word is among all knowledge sentences, in their original order. Without
// Knowledge, the reply is a fixed sentence that quotes the question.
func BuiltinAnswer(req ChatRequest) string {
	query := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == RoleUser {
			query = strings.TrimSpace(req.Messages[i].Content)
			break
		}
	}
	if len(req.Knowledge) > 0 {
		return extract(query, req.Knowledge)
	}
	if query == "" {
		return builtinIntro
	}
	return builtinIntro + ` You said: "` + query + `"`
}

// extract picks the sentences of knowledge most related to query.
func extract(query string, knowledge []string) string {
	type candidate struct {
		text  string
		terms map[string]bool
		order int
		score float64
	}
	var cands []*candidate
	seen := map[string]bool{}
	df := map[string]int{}
	for _, snippet := range knowledge {
		for _, s := range sentences(snippet) {
			if seen[s] {
				continue
			}
			seen[s] = true
			c := &candidate{text: s, terms: answerTerms(s), order: len(cands)}
			for t := range c.terms {
				df[t]++
			}
			cands = append(cands, c)
		}
	}
	q := answerTerms(query)
	var hits []*candidate
	for _, c := range cands {
		for t := range q {
			if c.terms[t] {
				c.score += math.Log(1 + float64(len(cands))/float64(df[t]))
			}
		}
		if c.score > 0 {
			hits = append(hits, c)
		}
	}
	if len(hits) == 0 {
		return builtinNoMatch
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].score > hits[j].score })
	// A sentence that shares only a common word or two with the question
	// (less than half the best one's weight) does not join the answer.
	keep := 1
	for keep < len(hits) && keep < builtinMaxSentences && hits[keep].score >= hits[0].score/2 {
		keep++
	}
	hits = hits[:keep]
	sort.Slice(hits, func(i, j int) bool { return hits[i].order < hits[j].order })
	parts := make([]string, len(hits))
	for i, c := range hits {
		parts[i] = c.text
	}
	return strings.Join(parts, " ")
}

// BuiltinEmbeddingModel is the name of the builtin embedding model that
// new knowledge bases use: BuiltinEmbedding2. Any other name given to the
// builtin backend (among them "builtin", the name knowledge bases created
// before it hold) keeps BuiltinEmbedding, so that the vectors stored for a
// knowledge base and the vectors of its queries always come from one
// function.
const BuiltinEmbeddingModel = "builtin-2"

// builtinEmbedder is the offline embedding model; model picks the function.
type builtinEmbedder struct {
	model string
	price *pricing
}

func (m *builtinEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, Usage, error) {
	start := time.Now()
	embed := BuiltinEmbedding
	if m.model == BuiltinEmbeddingModel {
		embed = BuiltinEmbedding2
	}
	out := make([][]float32, len(texts))
	tokens := 0
	for i, t := range texts {
		if err := cancelled(ctx); err != nil {
			return nil, Usage{}, err
		}
		out[i] = embed(t)
		tokens += CountTokens(t)
	}
	return out, makeUsage(m.price, tokens, 0, time.Since(start)), nil
}

// BuiltinEmbedding returns the builtin embedding of text (model "builtin"):
// a vector of BuiltinEmbeddingDimensions floats with unit length (all
// zeros for empty or white-space-only text). It must never change: stored
// vectors were made with it.
//
// The text is lower-cased and its runs of white space become one space; it
// is then padded with a space at each end. Its features are every run of
// three consecutive characters (runes) of that, and every word of the text
// (a run of letters and digits, or a single Han, kana, Hangul or Thai
// character; lower case; common English stopwords left out) preceded by the
// two bytes "w" and 0x00 so that a word never collides with a trigram.
// Each feature's UTF-8 bytes are hashed with 64-bit FNV-1a; the hash modulo
// the dimension picks the slot and its top bit picks the sign (+1 or -1)
// that is added there. The sum is scaled to length 1. Texts that share many
// trigrams and words end up close in cosine similarity.
func BuiltinEmbedding(text string) []float32 {
	var h hashedVector
	h.trigrams(" " + strings.Join(strings.FieldsFunc(strings.ToLower(text), unicode.IsSpace), " ") + " ")
	for _, w := range terms(text) {
		h.add("w\x00", w)
	}
	return h.unit()
}

// BuiltinEmbedding2 is the builtin embedding of model BuiltinEmbeddingModel.
// It hashes features as BuiltinEmbedding does, with three differences that
// make it match on meaning more than on phrasing: the trigrams are taken
// from the words only (stopwords and punctuation left out, one space
// between words), so that "how do I" no longer makes two questions look
// alike; each word's Porter stem (as full-text search uses) is added twice,
// preceded by "s" and 0x00, so that "erupting" and "eruptions" share a
// strong feature; and the word itself still counts once. On appkb's
// evaluation collection it lifts semantic search from 0.79 to 0.91
// nDCG@10 (see bench/README.md, Quality).
func BuiltinEmbedding2(text string) []float32 {
	words := terms(text)
	var h hashedVector
	h.trigrams(" " + strings.Join(words, " ") + " ")
	for _, w := range words {
		h.add("w\x00", w)
		s := porterStem(w)
		h.add("s\x00", s)
		h.add("s\x00", s)
	}
	return h.unit()
}

// hashedVector sums hashed features into BuiltinEmbeddingDimensions slots.
type hashedVector [BuiltinEmbeddingDimensions]float64

// add hashes prefix+feature with 64-bit FNV-1a; the hash modulo the
// dimension picks the slot and its top bit the sign of the 1 added there.
func (v *hashedVector) add(prefix, feature string) {
	sum := fnv1a(fnv1a(fnvOffset, prefix), feature)
	slot := sum % BuiltinEmbeddingDimensions
	if sum>>63 == 0 {
		v[slot]++
	} else {
		v[slot]--
	}
}

// trigrams adds every run of three consecutive runes of s.
func (v *hashedVector) trigrams(s string) {
	// Byte offsets of the runes, so that trigrams are substrings, not copies.
	starts := make([]int, 0, len(s)+1)
	for i := range s {
		starts = append(starts, i)
	}
	starts = append(starts, len(s))
	for i := 0; i+3 < len(starts); i++ {
		v.add("", s[starts[i]:starts[i+3]])
	}
}

// unit returns v scaled to length 1 (all zeros when v is zero).
func (v *hashedVector) unit() []float32 {
	var length float64
	for _, x := range v {
		length += x * x
	}
	out := make([]float32, len(v))
	if length == 0 {
		return out
	}
	length = math.Sqrt(length)
	for i, x := range v {
		out[i] = float32(x / length)
	}
	return out
}

// 64-bit FNV-1a, written out so that hashing a substring allocates nothing.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnv1a(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// cosine is the dot product of two unit vectors.
func cosine(a, b []float32) float64 {
	var dot float64
	for i := range min(len(a), len(b)) {
		dot += float64(a[i]) * float64(b[i])
	}
	return dot
}

// builtinReranker scores documents by the query words they share, weighted
// by rarity, and by embedding similarity.
type builtinReranker struct{}

// Rerank gives each document 0.7 times its share of the query's weight
// plus 0.3 times the (non-negative) cosine similarity of the
// BuiltinEmbedding2 vectors, so scores lie in [0, 1]. The query's weight is
// the sum over its distinct word stems (Porter, as full-text search uses)
// of their inverse document frequency among the documents given,
// ln((1+n)/(1+df)) + 1 as in Dify's keyword scoring; a document's share
// is the part of that sum whose stems it contains. Equal scores keep the
// input order.
func (builtinReranker) Rerank(ctx context.Context, query string, docs []string, topN int) ([]RerankResult, error) {
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	q := stemSet(query)
	has := make([]map[string]bool, len(docs))
	df := make(map[string]int, len(q))
	for i, d := range docs {
		has[i] = stemSet(d)
		for t := range q {
			if has[i][t] {
				df[t]++
			}
		}
	}
	idf := make(map[string]float64, len(q))
	total := 0.0
	for t := range q {
		idf[t] = math.Log(float64(1+len(docs))/float64(1+df[t])) + 1
		total += idf[t]
	}
	qv := BuiltinEmbedding2(query)
	out := make([]RerankResult, len(docs))
	for i, d := range docs {
		share := 0.0
		for t := range q {
			if has[i][t] {
				share += idf[t]
			}
		}
		if total > 0 {
			share /= total
		}
		out[i] = RerankResult{Index: i, Score: 0.7*share + 0.3*math.Max(0, cosine(qv, BuiltinEmbedding2(d)))}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	if topN > 0 && topN < len(out) {
		out = out[:topN]
	}
	return out, nil
}

// questionWords are words of a request that name no topic ("please tell
// me…"); the answer's matching leaves them out besides the stopwords.
var questionWords = map[string]bool{"please": true, "tell": true, "explain": true, "describe": true, "know": true,
	"let": true, "show": true, "give": true}

// answerTerms are the Porter stems of the topic words of text, so that
// "Where can I park my bicycle?" meets "Bicycles may be parked…". The
// answer matches on stems, as the reranker does, and not on the exact
// words the embedding uses, which would miss plurals and tenses.
func answerTerms(text string) map[string]bool {
	set := map[string]bool{}
	for _, t := range terms(text) {
		if !questionWords[t] {
			set[porterStem(t)] = true
		}
	}
	return set
}

// stemSet returns the distinct Porter stems of the terms of text.
func stemSet(text string) map[string]bool {
	set := map[string]bool{}
	for _, t := range terms(text) {
		set[porterStem(t)] = true
	}
	return set
}

// builtinModerator flags texts that contain a keyword (case-insensitive).
type builtinModerator struct {
	keywords []string
}

func newBuiltinModerator(keywords []string) *builtinModerator {
	m := &builtinModerator{}
	for _, k := range keywords {
		if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
			m.keywords = append(m.keywords, k)
		}
	}
	return m
}

func (m *builtinModerator) Moderate(ctx context.Context, text string) (*ModerationResult, error) {
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	lower := strings.ToLower(text)
	for _, k := range m.keywords {
		if strings.Contains(lower, k) {
			return &ModerationResult{Flagged: true, Categories: []string{"keyword"}}, nil
		}
	}
	return &ModerationResult{}, nil
}
