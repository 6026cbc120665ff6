package llm

import (
	"appkb/internal/platform/apperr"

	"context"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var knowledge = []string{
	"appkb stores everything in one SQLite database. The data directory holds uploads too.",
	"Knowledge bases are split into chunks. Each chunk is indexed for full-text search with FTS5!",
	"The demo app answers with the built-in model.\nIt needs no network.",
}

func builtinChatModel(t *testing.T) ChatModel {
	t.Helper()
	m, err := (*Registry)(nil).Chat("appkb", "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBuiltinAnswers(t *testing.T) {
	tests := []struct {
		name      string
		req       ChatRequest
		want      string
		wantParts []string
	}{
		{name: "picks the sentence that shares the question's words",
			req:  ChatRequest{Knowledge: knowledge, Messages: []Message{{Role: RoleUser, Content: "Where are uploads kept?"}}},
			want: "The data directory holds uploads too."},
		{name: "rare words weigh more than common ones",
			req:  ChatRequest{Knowledge: knowledge, Messages: []Message{{Role: RoleUser, Content: "How is each chunk indexed?"}}},
			want: "Each chunk is indexed for full-text search with FTS5!"},
		{name: "several sentences keep their order",
			req: ChatRequest{Knowledge: knowledge, Messages: []Message{
				{Role: RoleUser, Content: "ignored, not the last user message"},
				{Role: RoleAssistant, Content: "network database"},
				{Role: RoleUser, Content: "Which database, and does it need the network?"},
			}},
			want: "appkb stores everything in one SQLite database. It needs no network."},
		{name: "plurals and tenses match by their stems; question words do not count",
			req: ChatRequest{Knowledge: []string{"Visitors sign in at the front desk. Bicycles may be parked in the courtyard racks.",
				"Cars park in the garage on level two."}, Messages: []Message{{Role: RoleUser, Content: "Where can I park my bicycle?"}}},
			want: "Bicycles may be parked in the courtyard racks."},
		{name: "please tell me is not a topic",
			req:  ChatRequest{Knowledge: []string{"Please ask the front desk for a visitor badge.", "Lunch is served at noon."}, Messages: []Message{{Role: RoleUser, Content: "Please tell me when lunch is served"}}},
			want: "Lunch is served at noon."},
		{name: "no overlap", req: ChatRequest{Knowledge: knowledge, Messages: []Message{{Role: RoleUser, Content: "Who won the 1998 world cup?"}}},
			want: builtinNoMatch},
		{name: "no knowledge quotes the question",
			req:  ChatRequest{Messages: []Message{{Role: RoleSystem, Content: "Be nice."}, {Role: RoleUser, Content: "  Hello there  "}}},
			want: builtinIntro + ` You said: "Hello there"`},
		{name: "no question", req: ChatRequest{}, want: builtinIntro},
		{name: "ideographs match one by one",
			req:  ChatRequest{Knowledge: []string{"今天天气很好。数据库在本地。"}, Messages: []Message{{Role: RoleUser, Content: "数据库在哪里？"}}},
			want: "数据库在本地。"},
	}
	m := builtinChatModel(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := m.Chat(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Content != tc.want {
				t.Errorf("answer = %q\nwant     %q", res.Content, tc.want)
			}
			if res.FinishReason != "stop" || len(res.ToolCalls) != 0 {
				t.Errorf("response = %+v", res)
			}
		})
	}
}

func TestBuiltinChatIsDeterministicAndStreamsTheSameAnswer(t *testing.T) {
	m := builtinChatModel(t)
	req := ChatRequest{
		Knowledge: knowledge,
		Messages:  []Message{{Role: RoleSystem, Content: "Answer from context."}, {Role: RoleUser, Content: "Does the demo app need a network or a database?"}},
		Tools:     []Tool{{Name: "search", Description: "never called by the builtin model"}},
	}
	first, err := m.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := m.Chat(context.Background(), req)
	if first.Content != again.Content || first.Usage.TotalTokens != again.Usage.TotalTokens {
		t.Errorf("two calls differ: %q vs %q", first.Content, again.Content)
	}
	var pieces []string
	streamed, err := m.Stream(context.Background(), req, func(c Chunk) error {
		if len(c.ToolCalls) != 0 {
			t.Errorf("the builtin model called a tool: %+v", c.ToolCalls)
		}
		pieces = append(pieces, c.Delta)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pieces, "") != first.Content || streamed.Content != first.Content {
		t.Errorf("streamed %q, blocking %q", strings.Join(pieces, ""), first.Content)
	}
	if want := len(strings.Fields(first.Content)); len(pieces) != want {
		t.Errorf("%d chunks, want one per word (%d): %q", len(pieces), want, pieces)
	}
	for _, res := range []*ChatResponse{first, streamed} {
		u := res.Usage
		if u.PromptTokens != CountMessages(req.Messages) || u.CompletionTokens != CountTokens(first.Content) || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Errorf("usage = %+v", u)
		}
		if u.PromptPrice != "" || u.Currency != "" {
			t.Errorf("prices without a price list: %+v", u)
		}
	}
}

func TestBuiltinStreamCancellation(t *testing.T) {
	m := builtinChatModel(t)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := m.Stream(ctx, ChatRequest{Messages: []Message{{Role: RoleUser, Content: "one two three four"}}}, func(Chunk) error {
		n++
		cancel()
		return nil
	})
	wantModelError(t, err, apperr.CodeCompletionRequestError)
	if n != 1 {
		t.Errorf("%d chunks after cancelling, want 1", n)
	}
}

func TestWordChunks(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"one", []string{"one"}},
		{"one two", []string{"one ", "two"}},
		{"  lead  and trail \n", []string{"  lead  ", "and ", "trail \n"}},
		{"日本語 テキスト", []string{"日本語 ", "テキスト"}},
	}
	for _, tc := range tests {
		got := wordChunks(tc.in)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("wordChunks(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Join(got, "") != tc.in {
			t.Errorf("wordChunks(%q) does not concatenate back", tc.in)
		}
	}
}

func TestSentences(t *testing.T) {
	got := sentences("Version 1.5 is out. Really?Yes!\nNew line。全角！ end")
	want := []string{"Version 1.5 is out.", "Really?Yes!", "New line。", "全角！", "end"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sentences = %q, want %q", got, want)
	}
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestBuiltinEmbedding(t *testing.T) {
	e, err := (*Registry)(nil).Embedding("whatever", "any-model")
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{
		"How do I reset my password?",
		"How can I reset the password of my account?",
		"Bananas are rich in potassium.",
		"",
	}
	vecs, usage, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	again, _, _ := e.Embed(context.Background(), texts)
	if !reflect.DeepEqual(vecs, again) {
		t.Error("embeddings differ between calls")
	}
	for i, v := range vecs[:3] {
		if len(v) != BuiltinEmbeddingDimensions || math.Abs(norm(v)-1) > 1e-5 {
			t.Errorf("vector %d: %d dims, norm %f", i, len(v), norm(v))
		}
	}
	if norm(vecs[3]) != 0 || len(vecs[3]) != BuiltinEmbeddingDimensions {
		t.Errorf("empty text gives norm %f", norm(vecs[3]))
	}
	similar, unrelated := cosine(vecs[0], vecs[1]), cosine(vecs[0], vecs[2])
	if similar <= unrelated+0.2 {
		t.Errorf("similar texts %.3f, unrelated %.3f: want the similar pair clearly closer", similar, unrelated)
	}
	if math.Abs(cosine(BuiltinEmbedding("Password RESET"), BuiltinEmbedding("password   reset"))-1) > 1e-6 {
		t.Error("case and spacing change the embedding")
	}
	want := 0
	for _, s := range texts {
		want += CountTokens(s)
	}
	if usage.PromptTokens != want || usage.TotalTokens != want || usage.CompletionTokens != 0 {
		t.Errorf("usage = %+v, want %d prompt tokens", usage, want)
	}
}

// TestBuiltinEmbeddingVersions checks that each builtin embedding model name
// keeps its function: "builtin" (and any name but BuiltinEmbeddingModel)
// is BuiltinEmbedding, pinned here by a checksum of its vectors, since
// knowledge bases hold vectors made with it; BuiltinEmbeddingModel is
// BuiltinEmbedding2, which brings other forms of a word closer.
func TestBuiltinEmbeddingVersions(t *testing.T) {
	checksum := func(v []float32) uint64 {
		h := uint64(fnvOffset)
		for _, x := range v {
			h = fnv1a(h, strconv.FormatFloat(float64(x), 'f', 6, 32)+",")
		}
		return h
	}
	pinned := []struct {
		text string
		sum  uint64
	}{
		{"How do I reset my password?", 0xb5ca69ba30172337},
		{"Volcanic eruptions happen when magma rises.", 0xeada9b16b598fa3d},
		{"東京の天気は晴れ", 0xae0753e67bde02ef},
	}
	for _, p := range pinned {
		if got := checksum(BuiltinEmbedding(p.text)); got != p.sum {
			t.Errorf("BuiltinEmbedding(%q) changed: checksum %x, want %x", p.text, got, p.sum)
		}
	}

	texts := []string{"Volcanic eruptions happen when magma rises.", "why do volcanoes erupt"}
	tests := []struct {
		model string
		embed func(string) []float32
	}{
		{"builtin", BuiltinEmbedding},
		{"", BuiltinEmbedding},
		{"tiny", BuiltinEmbedding},
		{BuiltinEmbeddingModel, BuiltinEmbedding2},
	}
	for _, tt := range tests {
		e, err := (*Registry)(nil).Embedding("appkb", tt.model)
		if err != nil {
			t.Fatal(err)
		}
		vecs, _, err := e.Embed(context.Background(), texts)
		if err != nil {
			t.Fatal(err)
		}
		for i, text := range texts {
			if !reflect.DeepEqual(vecs[i], tt.embed(text)) {
				t.Errorf("model %q embeds %q with the wrong function", tt.model, text)
			}
		}
	}

	v2 := BuiltinEmbedding2(texts[0])
	if len(v2) != BuiltinEmbeddingDimensions || math.Abs(norm(v2)-1) > 1e-5 {
		t.Errorf("version 2: %d dims, norm %f", len(v2), norm(v2))
	}
	if n := norm(BuiltinEmbedding2(" the, of ")); n != 0 {
		t.Errorf("stopwords alone give norm %f, want 0", n)
	}
	old := cosine(BuiltinEmbedding(texts[0]), BuiltinEmbedding(texts[1]))
	if now := cosine(v2, BuiltinEmbedding2(texts[1])); now < old+0.1 {
		t.Errorf("word forms: cosine %.3f with version 2, %.3f with version 1; want version 2 clearly closer", now, old)
	}
	// Questions that share only their stopwords are no longer alike.
	a, b := "how do I reset my password", "how do I bake bread"
	if old, now := cosine(BuiltinEmbedding(a), BuiltinEmbedding(b)), cosine(BuiltinEmbedding2(a), BuiltinEmbedding2(b)); now >= old {
		t.Errorf("unrelated questions: cosine %.3f with version 2, %.3f with version 1", now, old)
	}
}

func TestPorterStem(t *testing.T) {
	// Examples from Porter's paper, and words of appkb's evaluation.
	tests := []struct{ word, stem string }{
		{"caresses", "caress"}, {"ponies", "poni"}, {"ties", "ti"}, {"caress", "caress"}, {"cats", "cat"},
		{"feed", "feed"}, {"agreed", "agre"}, {"plastered", "plaster"}, {"bled", "bled"}, {"motoring", "motor"},
		{"sing", "sing"}, {"conflated", "conflat"}, {"troubled", "troubl"}, {"sized", "size"}, {"hopping", "hop"},
		{"tanned", "tan"}, {"falling", "fall"}, {"hissing", "hiss"}, {"fizzed", "fizz"}, {"failing", "fail"},
		{"filing", "file"}, {"happy", "happi"}, {"sky", "sky"}, {"relational", "relat"}, {"conditional", "condit"},
		{"rational", "ration"}, {"valenci", "valenc"}, {"digitizer", "digit"}, {"conformabli", "conform"},
		{"radicalli", "radic"}, {"differentli", "differ"}, {"vileli", "vile"}, {"analogousli", "analog"},
		{"vietnamization", "vietnam"}, {"predication", "predic"}, {"operator", "oper"}, {"feudalism", "feudal"},
		{"decisiveness", "decis"}, {"hopefulness", "hope"}, {"callousness", "callous"}, {"formaliti", "formal"},
		{"sensitiviti", "sensit"}, {"sensibiliti", "sensibl"}, {"triplicate", "triplic"}, {"formative", "form"},
		{"formalize", "formal"}, {"electriciti", "electr"}, {"electrical", "electr"}, {"hopeful", "hope"},
		{"goodness", "good"}, {"revival", "reviv"}, {"allowance", "allow"}, {"inference", "infer"},
		{"airliner", "airlin"}, {"gyroscopic", "gyroscop"}, {"adjustable", "adjust"}, {"defensible", "defens"},
		{"irritant", "irrit"}, {"replacement", "replac"}, {"adjustment", "adjust"}, {"dependent", "depend"},
		{"adoption", "adopt"}, {"homologou", "homolog"}, {"communism", "commun"}, {"activate", "activ"},
		{"angulariti", "angular"}, {"homologous", "homolog"}, {"effective", "effect"}, {"bowdlerize", "bowdler"},
		{"probate", "probat"}, {"rate", "rate"}, {"cease", "ceas"}, {"controll", "control"}, {"roll", "roll"},
		{"generalizations", "gener"}, {"oscillators", "oscil"}, {"erupting", "erupt"}, {"eruptions", "erupt"},
		{"running", "run"}, {"runs", "run"},
		// Left alone: short words, digits, letters outside a-z.
		{"is", "is"}, {"404", "404"}, {"mp3s", "mp3s"}, {"cafés", "cafés"}, {"東京", "東京"},
	}
	for _, tt := range tests {
		if got := porterStem(tt.word); got != tt.stem {
			t.Errorf("porterStem(%q) = %q, want %q", tt.word, got, tt.stem)
		}
	}
}

func TestBuiltinRerank(t *testing.T) {
	rr, err := (*Registry)(nil).Rerank("appkb", "")
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{
		"Bananas are yellow.",
		"Reset your password from the account page.",
		"The password must be long.",
		"",
	}
	got, err := rr.Rerank(context.Background(), "how to reset a password", docs, 0)
	if err != nil {
		t.Fatal(err)
	}
	order := make([]int, len(got))
	for i, r := range got {
		order[i] = r.Index
		if r.Score < 0 || r.Score > 1 {
			t.Errorf("score %f out of [0,1]", r.Score)
		}
	}
	if !reflect.DeepEqual(order[:2], []int{1, 2}) {
		t.Errorf("order = %v, want the two password documents first", order)
	}
	again, _ := rr.Rerank(context.Background(), "how to reset a password", docs, 0)
	if !reflect.DeepEqual(got, again) {
		t.Error("rerank differs between calls")
	}
	top, _ := rr.Rerank(context.Background(), "how to reset a password", docs, 1)
	if len(top) != 1 || top[0].Index != 1 {
		t.Errorf("top 1 = %v", top)
	}
}

// TestBuiltinRerankWeighsRareStems checks that a word rare among the
// documents counts more than a common one, and that other forms of a word
// (same Porter stem) match.
func TestBuiltinRerankWeighsRareStems(t *testing.T) {
	rr, err := (*Registry)(nil).Rerank("appkb", "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		query string
		docs  []string
		want  int
	}{
		{"oolong tea", []string{"Tea and more tea: green tea, black tea.", "Oolong from Taiwan.", "Tea grows on hills.", "Tea is sold in tins."}, 1},
		{"why do volcanoes erupt", []string{"Geysers spout hot water.", "An eruption starts when magma rises.", "Volcanic ash grounds planes."}, 1},
	}
	for _, tt := range tests {
		got, err := rr.Rerank(context.Background(), tt.query, tt.docs, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Index != tt.want {
			t.Errorf("%q: first %q (%.3f), want %q", tt.query, tt.docs[got[0].Index], got[0].Score, tt.docs[tt.want])
		}
	}
}

func TestBuiltinModeration(t *testing.T) {
	r, err := Parse([]byte("providers:\n  - {name: guard, backend: builtin, keywords: [Secret Project, '  ']}\n"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		provider, text string
		flagged        bool
	}{
		{"guard", "Tell me about the SECRET project.", true},
		{"guard", "Tell me about the weather.", false},
		{"appkb", "Tell me about the secret project.", false},
	}
	for _, tc := range tests {
		m, err := r.Moderation(tc.provider, "")
		if err != nil {
			t.Fatal(err)
		}
		res, err := m.Moderate(context.Background(), tc.text)
		if err != nil || res.Flagged != tc.flagged {
			t.Errorf("%s: Moderate(%q) = %+v, %v; want flagged %v", tc.provider, tc.text, res, err, tc.flagged)
		}
	}
}

func TestBuiltinHasOfflineSpeech(t *testing.T) {
	r := (*Registry)(nil)
	if m, err := r.SpeechToText("appkb", ""); err != nil {
		t.Errorf("speech to text: %v", err)
	} else if _, ok := m.(builtinTranscriber); !ok {
		t.Errorf("speech to text is %T", m)
	}
	if m, err := r.TextToSpeech("appkb", ""); err != nil {
		t.Errorf("text to speech: %v", err)
	} else if _, ok := m.(builtinSpeaker); !ok {
		t.Errorf("text to speech is %T", m)
	}
}

func BenchmarkBuiltinEmbedding(b *testing.B) {
	text := strings.Repeat("Knowledge bases are split into chunks and indexed. ", 20)
	for _, bm := range []struct {
		name  string
		embed func(string) []float32
	}{{"v1", BuiltinEmbedding}, {"v2", BuiltinEmbedding2}} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				bm.embed(text)
			}
		})
	}
}
