package textsplit

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"appkb/internal/llm"
)

// checkSpans verifies the Splitter rules on the spans of text: exact token
// counts, the size rule, trimmed non-empty content, order, overlap only
// backwards, and that every non-space character outside the separators is
// in some chunk.
func checkSpans(t *testing.T, s Splitter, text string, spans []span) {
	t.Helper()
	limit := max(s.MaxTokens, 1)
	covered := make([]bool, len(text))
	prevStart, prevEnd := -1, -1
	for k, sp := range spans {
		content := text[sp.start:sp.end]
		if content == "" {
			t.Fatalf("chunk %d is empty", k+1)
		}
		if content != strings.TrimSpace(content) {
			t.Fatalf("chunk %d not trimmed: %q", k+1, content)
		}
		if !utf8.ValidString(content) && utf8.ValidString(text) {
			t.Fatalf("chunk %d cuts a character: %q", k+1, content)
		}
		if n := llm.CountTokens(content); n != sp.tokens {
			t.Fatalf("chunk %d: Tokens %d, real count %d: %q", k+1, sp.tokens, n, content)
		}
		if sp.tokens > limit && utf8.RuneCountInString(content) > 1 {
			t.Fatalf("chunk %d has %d tokens, limit %d: %q", k+1, sp.tokens, limit, content)
		}
		if sp.start <= prevStart || sp.end <= prevEnd {
			t.Fatalf("chunk %d [%d,%d) does not advance past [%d,%d)", k+1, sp.start, sp.end, prevStart, prevEnd)
		}
		if s.Separator != "" && strings.Contains(content, s.Separator) {
			t.Fatalf("chunk %d spans the separator %q: %q", k+1, s.Separator, content)
		}
		for i := sp.start; i < sp.end; i++ {
			covered[i] = true
		}
		prevStart, prevEnd = sp.start, sp.end
	}
	inSep := make([]bool, len(text))
	if s.Separator != "" {
		for off := 0; ; {
			k := strings.Index(text[off:], s.Separator)
			if k < 0 {
				break
			}
			for i := off + k; i < off+k+len(s.Separator); i++ {
				inSep[i] = true
			}
			off += k + len(s.Separator)
		}
	}
	for i, r := range text {
		if !isSpace(r) && r != utf8.RuneError && !inSep[i] && !covered[i] {
			t.Fatalf("text at byte %d (%q) is in no chunk", i, text[i:min(len(text), i+20)])
		}
	}
}

func checkChunks(t *testing.T, s Splitter, text string, chunks []Chunk) {
	t.Helper()
	spans := s.spans(text)
	if len(spans) != len(chunks) {
		t.Fatalf("%d chunks, %d spans", len(chunks), len(spans))
	}
	for i, c := range chunks {
		if c.Position != i+1 {
			t.Fatalf("chunk %d has position %d", i+1, c.Position)
		}
		if c.Content != text[spans[i].start:spans[i].end] || c.Tokens != spans[i].tokens {
			t.Fatalf("chunk %d differs from its span", i+1)
		}
	}
	checkSpans(t, s, text, spans)
}

// overlapOf returns how many bytes chunk k+1 repeats from the end of chunk k.
func overlapOf(spans []span, k int) int {
	return max(0, spans[k].end-spans[k+1].start)
}

// doc builds a document of paragraphs of numbered sentences.
func doc(paragraphs, sentences int) string {
	var b strings.Builder
	for p := range paragraphs {
		if p > 0 {
			b.WriteString("\n\n")
		}
		for s := range sentences {
			if s > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "Paragraph %d sentence %d explains how the knowledge base splits documents into chunks.", p+1, s+1)
		}
	}
	return b.String()
}

func TestResolve(t *testing.T) {
	seg := func(sep string, maxTokens, overlap int) *Segmentation {
		return &Segmentation{Separator: sep, MaxTokens: maxTokens, ChunkOverlap: overlap}
	}
	tests := []struct {
		name      string
		rule      ProcessRule
		want      Config
		wantField string // set when a *RuleError is expected
	}{
		{
			name: "automatic ignores its rules",
			rule: ProcessRule{Mode: ModeAutomatic, Rules: &Rules{Segmentation: seg("x", 60, 1)}},
			want: Config{Mode: ModeAutomatic, RemoveExtraSpaces: true, Segment: Splitter{MaxTokens: 500, Overlap: 50}},
		},
		{
			name: "custom without rules takes the defaults",
			rule: ProcessRule{Mode: ModeCustom},
			want: Config{Mode: ModeCustom, Segment: Splitter{Separator: "\n", MaxTokens: 500}},
		},
		{
			name: "custom unescapes the separator and reads pre-processing",
			rule: ProcessRule{Mode: ModeCustom, Rules: &Rules{
				PreProcessingRules: []PreProcessingRule{{ID: RemoveExtraSpaces, Enabled: true}, {ID: RemoveURLsEmails, Enabled: true}, {ID: RemoveStopwords, Enabled: true}, {ID: "unknown", Enabled: true}},
				Segmentation:       seg(`\n\n`, 800, 80),
			}},
			want: Config{Mode: ModeCustom, RemoveExtraSpaces: true, RemoveURLsEmails: true, Segment: Splitter{Separator: "\n\n", MaxTokens: 800, Overlap: 80}},
		},
		{
			name: "hierarchical defaults: paragraph parents, line children",
			rule: ProcessRule{Mode: ModeHierarchical, Rules: &Rules{}},
			want: Config{Mode: ModeHierarchical, ParentMode: ParentParagraph, Segment: Splitter{Separator: "\n\n", MaxTokens: 500}, Child: Splitter{Separator: "\n", MaxTokens: 200}},
		},
		{
			name: "hierarchical full-doc with child segmentation",
			rule: ProcessRule{Mode: ModeHierarchical, Rules: &Rules{ParentMode: ParentFullDoc, SubchunkSegmentation: seg(`\t`, 100, 10)}},
			want: Config{Mode: ModeHierarchical, ParentMode: ParentFullDoc, Segment: Splitter{Separator: "\n\n", MaxTokens: 500}, Child: Splitter{Separator: "\t", MaxTokens: 100, Overlap: 10}},
		},
		{name: "missing mode", rule: ProcessRule{}, wantField: "process_rule.mode"},
		{name: "unknown mode", rule: ProcessRule{Mode: "smart"}, wantField: "process_rule.mode"},
		{name: "max_tokens below 50", rule: ProcessRule{Mode: ModeCustom, Rules: &Rules{Segmentation: seg("", 49, 0)}}, wantField: "process_rule.rules.segmentation.max_tokens"},
		{name: "max_tokens above 4000", rule: ProcessRule{Mode: ModeCustom, Rules: &Rules{Segmentation: seg("", 4001, 0)}}, wantField: "process_rule.rules.segmentation.max_tokens"},
		{name: "negative max_tokens", rule: ProcessRule{Mode: ModeCustom, Rules: &Rules{Segmentation: seg("", -5, 0)}}, wantField: "process_rule.rules.segmentation.max_tokens"},
		{name: "negative overlap", rule: ProcessRule{Mode: ModeCustom, Rules: &Rules{Segmentation: seg("", 100, -1)}}, wantField: "process_rule.rules.segmentation.chunk_overlap"},
		{name: "overlap equal to max_tokens", rule: ProcessRule{Mode: ModeCustom, Rules: &Rules{Segmentation: seg("", 100, 100)}}, wantField: "process_rule.rules.segmentation.chunk_overlap"},
		{name: "overlap over the default max_tokens", rule: ProcessRule{Mode: ModeCustom, Rules: &Rules{Segmentation: seg("", 0, 600)}}, wantField: "process_rule.rules.segmentation.chunk_overlap"},
		{name: "unknown parent mode", rule: ProcessRule{Mode: ModeHierarchical, Rules: &Rules{ParentMode: "page"}}, wantField: "process_rule.rules.parent_mode"},
		{name: "child max_tokens out of range", rule: ProcessRule{Mode: ModeHierarchical, Rules: &Rules{SubchunkSegmentation: seg("", 10, 0)}}, wantField: "process_rule.rules.subchunk_segmentation.max_tokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.rule.Resolve()
			if tc.wantField != "" {
				var re *RuleError
				if !errors.As(err, &re) || re.Field != tc.wantField {
					t.Fatalf("err = %v, want a RuleError on %s", err, tc.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestRuleJSON(t *testing.T) {
	// The API's JSON, with nulls and the escaped separator, reads into ProcessRule.
	body := `{"mode":"hierarchical","rules":{"pre_processing_rules":[{"id":"remove_extra_spaces","enabled":true}],
		"segmentation":{"separator":"\\n\\n","max_tokens":null,"chunk_overlap":null},"parent_mode":"paragraph",
		"subchunk_segmentation":{"separator":"\\n","max_tokens":120,"chunk_overlap":null}}}`
	var r ProcessRule
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	c, err := r.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Mode: ModeHierarchical, ParentMode: ParentParagraph, RemoveExtraSpaces: true,
		Segment: Splitter{Separator: "\n\n", MaxTokens: 500}, Child: Splitter{Separator: "\n", MaxTokens: 120}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v", c)
	}
	// Rule gives the resolved rule back, and resolving it again is stable.
	again, err := c.Rule().Resolve()
	if err != nil || !reflect.DeepEqual(again, c) {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
	auto, _ := ProcessRule{Mode: ModeAutomatic}.Resolve()
	if got := auto.Rule(); got.Rules.Segmentation.MaxTokens != 500 || got.Rules.Segmentation.ChunkOverlap != 50 || !got.Rules.PreProcessingRules[0].Enabled {
		t.Fatalf("automatic rules: %+v", got.Rules)
	}
}

func TestUnescapeSeparator(t *testing.T) {
	tests := map[string]string{
		`\n\n`: "\n\n", `\t`: "\t", `\r\n`: "\r\n", `\\n`: `\n`, `###`: "###", `a\b`: `a\b`, `\`: `\`, "\n": "\n",
	}
	for in, want := range tests {
		if got := UnescapeSeparator(in); got != want {
			t.Errorf("UnescapeSeparator(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClean(t *testing.T) {
	tests := []struct {
		name         string
		spaces, urls bool
		in, want     string
	}{
		{"always: line breaks and control characters", false, false, "a\r\nb\rc\x00d\x07\fe\uFEFF\x85f\xff", "a\nb\ncd\nef"},
		{"extra spaces: runs collapse, single tab kept", true, false, "a  b\t\tc\u00a0\u3000d e\tf", "a b c d e\tf"},
		{"extra spaces: line ends and blank lines", true, false, "one  \n\n\n \n\t\ntwo\n\nthree\n", "one\n\ntwo\n\nthree\n"},
		{"urls and e-mails removed", false, true, "See https://example.com/a?b=1. Mail ann.lee+kb@mail.example.org, or visit www.example.com!", "See . Mail , or visit !"},
		{"markdown links keep their text", false, true, "Read [the guide](https://x.io/guide \"Guide\") and ![logo](img/logo.png).", "Read the guide and logo."},
		{"both, in order", true, true, "Ask  bob@example.com   today  (http://a.b/c)", "Ask today ()"},
		{"nothing enabled keeps spacing", false, false, "a   b\n\n\n\nc", "a   b\n\n\n\nc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{RemoveExtraSpaces: tc.spaces, RemoveURLsEmails: tc.urls}
			if got := c.Clean(tc.in); got != tc.want {
				t.Errorf("Clean = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSplitterRules(t *testing.T) {
	long := doc(6, 12) // ~6 paragraphs of ~200 tokens
	tests := []struct {
		name  string
		s     Splitter
		text  string
		check func(t *testing.T, spans []span, text string)
	}{
		{
			name: "short text is one chunk",
			s:    Splitter{MaxTokens: 500, Overlap: 50},
			text: "  A short note.\n\nWith two paragraphs.  ",
			check: func(t *testing.T, spans []span, text string) {
				if len(spans) != 1 || text[spans[0].start:spans[0].end] != "A short note.\n\nWith two paragraphs." {
					t.Fatalf("spans %v", spans)
				}
			},
		},
		{
			name: "blank text gives no chunk",
			s:    Splitter{MaxTokens: 500},
			text: " \n\t\n ",
			check: func(t *testing.T, spans []span, _ string) {
				if len(spans) != 0 {
					t.Fatalf("spans %v", spans)
				}
			},
		},
		{
			name: "paragraphs are packed whole when they fit",
			s:    Splitter{MaxTokens: 500},
			text: long,
			check: func(t *testing.T, spans []span, text string) {
				for k, sp := range spans {
					c := text[sp.start:sp.end]
					if !strings.HasPrefix(c, "Paragraph") || !strings.HasSuffix(c, "chunks.") {
						t.Errorf("chunk %d does not hold whole paragraphs: %.40q…", k+1, c)
					}
					if k+1 < len(spans) && overlapOf(spans, k) != 0 {
						t.Errorf("overlap without Overlap")
					}
				}
				if len(spans) < 3 {
					t.Errorf("only %d chunks", len(spans))
				}
			},
		},
		{
			name: "long paragraphs are cut at sentences, with sentence overlap",
			s:    Splitter{MaxTokens: 100, Overlap: 30},
			text: long,
			check: func(t *testing.T, spans []span, text string) {
				for k := range spans {
					c := text[spans[k].start:spans[k].end]
					if !strings.HasPrefix(c, "Paragraph") || !strings.HasSuffix(c, ".") {
						t.Errorf("chunk %d is not whole sentences: %q", k+1, c)
					}
					if k+1 < len(spans) {
						next := text[spans[k+1].start:spans[k+1].end]
						sameParagraph := next[:len("Paragraph 1")] == c[:len("Paragraph 1")]
						if sameParagraph && overlapOf(spans, k) == 0 {
							t.Errorf("no overlap between chunks %d and %d", k+1, k+2)
						}
						if o := llm.CountTokens(text[spans[k+1].start:min(spans[k].end, spans[k+1].end)]); overlapOf(spans, k) > 0 && o > 31 {
							t.Errorf("overlap of %d tokens", o)
						}
					}
				}
			},
		},
		{
			name: "word overlap when sentences are longer than the overlap",
			s:    Splitter{MaxTokens: 60, Overlap: 8},
			text: strings.Repeat("The quick brown fox jumps over the lazy dog near the river bank today ", 30),
			check: func(t *testing.T, spans []span, text string) {
				for k := 0; k+1 < len(spans); k++ {
					if overlapOf(spans, k) == 0 {
						t.Errorf("no overlap after chunk %d", k+1)
					}
				}
			},
		},
		{
			name: "custom separator is a hard boundary and is dropped",
			s:    Splitter{Separator: "###", MaxTokens: 50, Overlap: 10},
			text: "first###second part###" + strings.Repeat("word ", 120) + "###last",
			check: func(t *testing.T, spans []span, text string) {
				got := []string{}
				for _, sp := range spans {
					got = append(got, text[sp.start:sp.end])
				}
				if got[0] != "first" || got[1] != "second part" || got[len(got)-1] != "last" || len(got) < 5 {
					t.Fatalf("chunks %q", got)
				}
			},
		},
		{
			name: "a word longer than the limit is cut between characters",
			s:    Splitter{MaxTokens: 20},
			text: "start " + strings.Repeat("xyzzy", 200) + " end",
			check: func(t *testing.T, spans []span, text string) {
				if len(spans) < 10 {
					t.Fatalf("%d chunks", len(spans))
				}
			},
		},
		{
			name: "Chinese is cut after full stops",
			s:    Splitter{MaxTokens: 60, Overlap: 10},
			text: strings.Repeat("知识库把文档切分成片段，每个片段都会被索引。检索时会返回最相关的片段！", 12),
			check: func(t *testing.T, spans []span, text string) {
				for k, sp := range spans {
					c := text[sp.start:sp.end]
					if !strings.HasSuffix(c, "。") && !strings.HasSuffix(c, "！") && k+1 < len(spans) {
						t.Errorf("chunk %d does not end a sentence: %q", k+1, c)
					}
				}
			},
		},
		{
			name: "limit of one token: single characters that need more are the only exception",
			s:    Splitter{MaxTokens: 1},
			text: "héllo 🙂 wörld",
			check: func(t *testing.T, spans []span, text string) {
				if len(spans) < 5 {
					t.Fatalf("%d chunks", len(spans))
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spans := tc.s.spans(tc.text)
			checkSpans(t, tc.s, tc.text, spans)
			tc.check(t, spans, tc.text)
			checkChunks(t, tc.s, tc.text, tc.s.Split(tc.text))
		})
	}
}

func TestProcessModes(t *testing.T) {
	text := "Intro line one.\nIntro line two.\n\n" + doc(3, 10) + "\n\n\n\nContact   sales@example.com or https://example.com/pricing today."
	custom := func(sep string, maxTokens, overlap int, pre ...PreProcessingRule) ProcessRule {
		return ProcessRule{Mode: ModeCustom, Rules: &Rules{PreProcessingRules: pre, Segmentation: &Segmentation{Separator: sep, MaxTokens: maxTokens, ChunkOverlap: overlap}}}
	}
	tests := []struct {
		name  string
		rule  ProcessRule
		check func(t *testing.T, c Config, cleaned string, chunks []Chunk)
	}{
		{
			name: "automatic: 500-token chunks, spaces cleaned, URLs kept",
			rule: ProcessRule{Mode: ModeAutomatic},
			check: func(t *testing.T, c Config, cleaned string, chunks []Chunk) {
				checkChunks(t, c.Segment, cleaned, chunks)
				last := chunks[len(chunks)-1].Content
				if !strings.Contains(last, "Contact sales@example.com or https://example.com/pricing") {
					t.Errorf("last chunk %q", last)
				}
				if strings.Contains(cleaned, "\n\n\n") {
					t.Error("blank lines not collapsed")
				}
				if len(chunks) < 2 {
					t.Errorf("%d chunks", len(chunks))
				}
			},
		},
		{
			name: "custom: blank-line separator, each paragraph its own chunk, URLs removed",
			rule: custom(`\n\n`, 1000, 0, PreProcessingRule{ID: RemoveURLsEmails, Enabled: true}),
			check: func(t *testing.T, c Config, cleaned string, chunks []Chunk) {
				checkChunks(t, c.Segment, cleaned, chunks)
				if len(chunks) != 5 {
					t.Fatalf("%d chunks, want 5 (intro, 3 paragraphs, contact)", len(chunks))
				}
				if chunks[0].Content != "Intro line one.\nIntro line two." {
					t.Errorf("first chunk %q", chunks[0].Content)
				}
				if chunks[4].Content != "Contact    or  today." {
					t.Errorf("contact chunk %q", chunks[4].Content)
				}
			},
		},
		{
			name: "custom: line separator and small chunks with overlap",
			rule: custom(`\n`, 60, 15, PreProcessingRule{ID: RemoveExtraSpaces, Enabled: true}),
			check: func(t *testing.T, c Config, cleaned string, chunks []Chunk) {
				checkChunks(t, c.Segment, cleaned, chunks)
				if chunks[0].Content != "Intro line one." || chunks[1].Content != "Intro line two." {
					t.Errorf("lines not kept apart: %q, %q", chunks[0].Content, chunks[1].Content)
				}
				spans := c.Segment.spans(cleaned)
				overlaps := 0
				for k := 0; k+1 < len(spans); k++ {
					if overlapOf(spans, k) > 0 {
						overlaps++
					}
				}
				if overlaps == 0 {
					t.Error("no overlap between the pieces of long lines")
				}
			},
		},
		{
			name: "hierarchical paragraph: parents by blank line, children by sentence-sized limit",
			rule: ProcessRule{Mode: ModeHierarchical, Rules: &Rules{
				PreProcessingRules:   []PreProcessingRule{{ID: RemoveExtraSpaces, Enabled: true}},
				Segmentation:         &Segmentation{Separator: `\n\n`, MaxTokens: 500},
				SubchunkSegmentation: &Segmentation{Separator: `\n`, MaxTokens: 50},
			}},
			check: func(t *testing.T, c Config, cleaned string, parents []Chunk) {
				checkChunks(t, c.Segment, cleaned, parents)
				if len(parents) != 5 {
					t.Fatalf("%d parents", len(parents))
				}
				for _, p := range parents {
					if len(p.Children) == 0 {
						t.Fatalf("parent %d has no children", p.Position)
					}
					checkChunks(t, c.Child, p.Content, p.Children)
				}
				if got := parents[0].Children; len(got) != 2 || got[0].Content != "Intro line one." {
					t.Errorf("intro children %+v", got)
				}
				if n := len(parents[1].Children); n < 4 {
					t.Errorf("a 10-sentence paragraph has %d children of ≤50 tokens", n)
				}
			},
		},
		{
			name: "hierarchical full-doc: one parent with every child",
			rule: ProcessRule{Mode: ModeHierarchical, Rules: &Rules{
				ParentMode:           ParentFullDoc,
				SubchunkSegmentation: &Segmentation{Separator: `\n\n`, MaxTokens: 300, ChunkOverlap: 20},
			}},
			check: func(t *testing.T, c Config, cleaned string, parents []Chunk) {
				if len(parents) != 1 || parents[0].Content != strings.TrimSpace(cleaned) || parents[0].Position != 1 {
					t.Fatalf("parents %d", len(parents))
				}
				if parents[0].Tokens != llm.CountTokens(parents[0].Content) {
					t.Error("parent tokens")
				}
				checkChunks(t, c.Child, parents[0].Content, parents[0].Children)
				if len(parents[0].Children) != 5 {
					t.Errorf("%d children", len(parents[0].Children))
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.rule.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := Process(text, tc.rule)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c, c.Clean(text), chunks)
		})
	}
	if _, err := Process(text, ProcessRule{Mode: "nope"}); err == nil {
		t.Error("Process accepted an invalid rule")
	}
	if chunks, err := Process("   ", ProcessRule{Mode: ModeHierarchical, Rules: &Rules{ParentMode: ParentFullDoc}}); err != nil || chunks != nil {
		t.Errorf("blank full-doc: %v, %v", chunks, err)
	}
}

func TestKeywords(t *testing.T) {
	tests := []struct {
		name string
		text string
		n    int
		want []string
	}{
		{"frequency then first appearance, stop words dropped",
			"The index stores chunks. Chunks are indexed; the INDEX is a keyword index of chunks and it is fast.", 4,
			[]string{"index", "chunks", "stores", "indexed"}},
		{"contractions and short terms", "Don't split it, don't! x y z gpt-4o", 10, []string{"split", "gpt", "4o"}},
		{"Chinese words", "知识库检索知识", 10, []string{"知识", "知识库", "检索"}},
		{"Chinese question, function words dropped", "自行车停在哪里？", 10, []string{"自行", "行车", "自行车", "停在"}},
		{"Chinese and English mixed", "用Python写API服务", 10, []string{"用", "python", "写", "api", "服务"}},
		{"Japanese split where the script changes", "東京駅から新幹線で大阪へ", 10, []string{"東京", "京駅", "新幹線", "大阪"}},
		{"katakana word with long vowel mark", "ポータルサイトから予約してください", 10, []string{"ポータルサイト", "予約"}},
		{"single CJK character stays", "猫 and dog", 10, []string{"猫", "dog"}},
		{"accents and numbers", "Café café 2024 2024 2024", 10, []string{"2024", "café"}},
		{"n of zero", "some words here", 0, nil},
		{"no terms", "the a of , .", 5, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Keywords(tc.text, tc.n); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Keywords = %q, want %q", got, tc.want)
			}
		})
	}
}

// BenchmarkSplitAutomatic splits a 330 KB English document with the
// automatic settings; b.SetBytes makes the report show the throughput.
func BenchmarkSplitAutomatic(b *testing.B) {
	text := doc(400, 6)
	c, _ := ProcessRule{Mode: ModeAutomatic}.Resolve()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		c.Split(c.Clean(text))
	}
}

func TestCountLong(t *testing.T) {
	normal := doc(3, 5)
	if got, want := countLong(normal), llm.CountTokens(normal); got != want {
		t.Errorf("countLong = %d, want %d", got, want)
	}
	blob := strings.Repeat("QUJDREVGR0hJSktMTU5PUA", 2000) // 44 KB without a space
	got := countLong("before " + blob + " after")
	want := llm.CountTokens("before "+blob[:4096]+" after") * len(blob) / 4096 // rough
	if got < want/2 || got > want*2 {
		t.Errorf("countLong of a long run = %d, expected about %d", got, want)
	}
}
