package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"appkb/internal/llm"
)

// chunkModel streams a fixed answer in pieces of size bytes (the whole
// answer at once when size is 0) and keeps the requests it got.
type chunkModel struct {
	answer string
	size   int
	mu     sync.Mutex
	reqs   []llm.ChatRequest
}

func (m *chunkModel) Chat(_ context.Context, req llm.ChatRequest) (*llm.ChatResponse, error) {
	m.mu.Lock()
	req.Messages = slices.Clone(req.Messages)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return &llm.ChatResponse{Content: m.answer, FinishReason: "stop", Usage: tokenUsage(7)}, nil
}

func (m *chunkModel) Stream(ctx context.Context, req llm.ChatRequest, onChunk func(llm.Chunk) error) (*llm.ChatResponse, error) {
	resp, err := m.Chat(ctx, req)
	if err != nil || onChunk == nil {
		return resp, err
	}
	size := m.size
	if size <= 0 {
		size = len(m.answer)
	}
	for i := 0; i < len(m.answer); i += size {
		if err := onChunk(llm.Chunk{Delta: m.answer[i:min(i+size, len(m.answer))]}); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// joinParts renders split parts as "T(text)", "R(reasoning)" and "|" for
// the end of a block, merging neighbours of the same kind so that the
// result does not depend on where the answer was cut.
func joinParts(parts []thinkPart) string {
	var b strings.Builder
	kind := byte(0)
	for _, p := range parts {
		k := byte('T')
		switch {
		case p.end:
			k = '|'
		case p.reasoning:
			k = 'R'
		}
		if k != kind || k == '|' {
			if kind != 0 && kind != '|' {
				b.WriteString(")")
			}
			b.WriteByte(k)
			if k != '|' {
				b.WriteString("(")
			}
			kind = k
		}
		if k != '|' {
			b.WriteString(p.text)
		}
	}
	if kind != 0 && kind != '|' {
		b.WriteString(")")
	}
	return b.String()
}

func TestThinkSplitter(t *testing.T) {
	tests := []struct {
		name, in                string
		wantParts               string
		wantText, wantReasoning string
		wantFound               bool
	}{
		{name: "reasoning then text", in: "<think>plan</think>Hello",
			wantParts: "R(plan)|T(Hello)", wantText: "Hello", wantReasoning: "plan", wantFound: true},
		{name: "no tags is all text", in: "Hello <b>world</b> a<b",
			wantParts: "T(Hello <b>world</b> a<b)", wantText: "Hello <b>world</b> a<b"},
		{name: "whitespace around the reasoning and after the block is dropped", in: "<think>\n  step 1\n step 2 \n</think>\n\nAnswer  ",
			wantParts: "R(step 1\n step 2)|T(Answer  )", wantText: "Answer  ", wantReasoning: "step 1\n step 2", wantFound: true},
		{name: "text before the block stays", in: "Hi <think>x</think> there",
			wantParts: "T(Hi )R(x)|T(there)", wantText: "Hi there", wantReasoning: "x", wantFound: true},
		{name: "two blocks are joined by a newline", in: "<think>a</think>b<think> c </think>d",
			wantParts: "R(a)|T(b)R(\nc)|T(d)", wantText: "bd", wantReasoning: "a\nc", wantFound: true},
		{name: "an empty block still ends", in: "<think>\n\n</think>\n\nok",
			wantParts: "|T(ok)", wantText: "ok", wantFound: true},
		{name: "a block cut short is reasoning", in: "<think>still thinking",
			wantParts: "R(still thinking)|", wantReasoning: "still thinking", wantFound: true},
		{name: "a lone closing tag is text", in: "a</think>b",
			wantParts: "T(a</think>b)", wantText: "a</think>b"},
		{name: "an almost-tag at the end is text", in: "x <thin",
			wantParts: "T(x <thin)", wantText: "x <thin"},
		{name: "an almost-closing tag inside reasoning", in: "<think>a </thin b</think>c",
			wantParts: "R(a </thin b)|T(c)", wantText: "c", wantReasoning: "a </thin b", wantFound: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, reasoning, found := splitThink(tc.in)
			if text != tc.wantText || reasoning != tc.wantReasoning || found != tc.wantFound {
				t.Errorf("splitThink = %q, %q, %v; want %q, %q, %v", text, reasoning, found, tc.wantText, tc.wantReasoning, tc.wantFound)
			}
			// Every cut in two, and one byte at a time, give the same parts.
			cuts := [][]string{}
			for i := 0; i <= len(tc.in); i++ {
				cuts = append(cuts, []string{tc.in[:i], tc.in[i:]})
			}
			cuts = append(cuts, strings.Split(tc.in, ""))
			for _, pieces := range cuts {
				var s thinkSplitter
				var parts []thinkPart
				for _, p := range pieces {
					parts = append(parts, s.Feed(p)...)
				}
				parts = append(parts, s.Close()...)
				if got := joinParts(parts); got != tc.wantParts {
					t.Errorf("pieces %q: parts %s, want %s", pieces, got, tc.wantParts)
				}
				for _, p := range parts {
					if p.end && p.text != "" {
						t.Errorf("pieces %q: a closing part carries text %q", pieces, p.text)
					}
				}
			}
		})
	}
}

// reasoningEvents lists the reasoning_chunk events of a run.
func reasoningEvents(rec *recorder) []*ReasoningChunk {
	var out []*ReasoningChunk
	for _, e := range rec.events {
		if x, ok := e.(*ReasoningChunk); ok {
			out = append(out, x)
		}
	}
	return out
}

// llmNode is an llm node "l" on the fake model; extra is added to its data.
func llmNode(extra string) string {
	return `
  - id: l
    data: {type: llm, title: L, model: {provider: acme, name: m, mode: chat, completion_params: {temperature: 0.1}},
      prompt_template: [{role: system, text: 'You help.'}, {role: user, text: '{{#start.q#}}'}]` + extra + `}`
}

func TestLLMReasoningStream(t *testing.T) {
	doc := loadSpec(t)
	const think = "<think>plan</think>Hello"
	answerTo := func(tmpl string) string {
		return graph(llmNode("%s")+`
  - id: a
    data: {type: answer, title: A, answer: '`+tmpl+`'}`, edge("start", "source", "l"), edge("l", "source", "a"))
	}
	toEnd := graph(llmNode("%s")+`
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [l, text]}]}`, edge("start", "source", "l"), edge("l", "source", "end"))
	viaTemplate := graph(llmNode("%s")+`
  - id: x
    data: {type: template-transform, title: X, template: '[{{ t }}]', variables: [{variable: t, value_selector: [l, text]}]}
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [x, output]}]}`,
		edge("start", "source", "l"), edge("l", "source", "x"), edge("x", "source", "end"))
	tests := []struct {
		name          string
		src           string // %s takes the extra node data
		format        string
		mode          string
		answer        string
		wantAnswer    string // chatflow answer
		wantOut       string // workflow output "out"
		wantText      string // the text streamed in text_chunk events
		wantReasoning string // joined reasoning_chunk pieces, "-" for none
		wantContent   string // reasoning_content output
	}{
		{name: "separated into an answer streams reasoning apart", src: answerTo("{{#l.text#}}"), format: "separated", mode: ModeChatflow,
			answer: think, wantAnswer: "Hello", wantText: "Hello", wantReasoning: "plan", wantContent: "plan"},
		{name: "separated keeps the answer's leading text first", src: answerTo("Bot: {{#l.text#}}!"), format: "separated", mode: ModeChatflow,
			answer: think, wantAnswer: "Bot: Hello!", wantText: "Bot: Hello!", wantReasoning: "plan", wantContent: "plan"},
		{name: "separated with only reasoning still shows the leading text", src: answerTo("Bot: {{#l.text#}}!"), format: "separated", mode: ModeChatflow,
			answer: "<think>plan</think>", wantAnswer: "Bot: !", wantText: "Bot: !", wantReasoning: "plan", wantContent: "plan"},
		{name: "separated without tags has no reasoning", src: answerTo("{{#l.text#}}"), format: "separated", mode: ModeChatflow,
			answer: "Hello", wantAnswer: "Hello", wantText: "Hello", wantReasoning: "-"},
		{name: "unset format keeps the tags", src: answerTo("{{#l.text#}}"), mode: ModeChatflow,
			answer: think, wantAnswer: think, wantText: think, wantReasoning: "-"},
		{name: "tagged keeps the tags", src: answerTo("{{#l.text#}}"), format: "tagged", mode: ModeChatflow,
			answer: think, wantAnswer: think, wantText: think, wantReasoning: "-"},
		{name: "separated into an end node", src: toEnd, format: "separated", mode: ModeWorkflow,
			answer: think, wantOut: "Hello", wantText: "Hello", wantReasoning: "plan", wantContent: "plan"},
		{name: "separated with no streamed text still sends reasoning", src: viaTemplate, format: "separated", mode: ModeWorkflow,
			answer: "<think> a\nb </think>\nHello", wantOut: "[Hello]", wantText: "", wantReasoning: "a\nb", wantContent: "a\nb"},
		{name: "unset format with no streamed text", src: viaTemplate, mode: ModeWorkflow,
			answer: think, wantOut: "[" + think + "]", wantText: "", wantReasoning: "-"},
	}
	for _, tc := range tests {
		for _, size := range []int{0, 1, 2, 3, 5} {
			t.Run(fmt.Sprintf("%s/chunks of %d", tc.name, size), func(t *testing.T) {
				extra := ""
				if tc.format != "" {
					extra = ", reasoning_format: " + tc.format
				}
				m := &chunkModel{answer: tc.answer, size: size}
				in := RunInput{Workflow: graphYAML(t, fmt.Sprintf(tc.src, extra)), Mode: tc.mode, Inputs: map[string]any{"q": "hi"}}
				if tc.mode == ModeChatflow {
					in.MessageID, in.ConversationID = "6a0e0c43-4d0b-4b8e-9a55-0e0d8e2e7d11", "3f1c1e5e-8f7a-4e57-9d1b-2b9f8f1c0a01"
				}
				res, rec := run1(t, &Engine{Models: &scriptedSource{model: m}}, in)
				checkOrder(t, rec)
				if res.Status != RunSucceeded {
					t.Fatalf("status %s (%s); trace %s", res.Status, res.Error, rec.trace())
				}
				if tc.mode == ModeChatflow && res.Answer != tc.wantAnswer {
					t.Errorf("answer %q, want %q", res.Answer, tc.wantAnswer)
				}
				if tc.mode == ModeWorkflow && res.Outputs["out"] != tc.wantOut {
					t.Errorf("output %q, want %q", res.Outputs["out"], tc.wantOut)
				}
				if got := rec.text(); got != tc.wantText {
					t.Errorf("streamed text %q, want %q", got, tc.wantText)
				}
				if tc.wantReasoning != "-" {
					for _, e := range rec.events {
						if x, ok := e.(*TextChunk); ok && (strings.Contains(x.Data.Text, "think") || strings.Contains(x.Data.Text, "plan")) {
							t.Errorf("reasoning leaked into text_chunk %q", x.Data.Text)
						}
					}
				}
				evs := reasoningEvents(rec)
				var joined strings.Builder
				finals := 0
				for i, ev := range evs {
					joined.WriteString(ev.Data.Reasoning)
					if ev.Data.NodeID == nil || *ev.Data.NodeID != "l" || ev.Event != EventReasoningChunk || ev.TaskID == "" || ev.WorkflowRunID == "" {
						t.Errorf("reasoning_chunk %+v", ev)
					}
					if ev.Data.IsFinal {
						finals++
						if i != len(evs)-1 {
							t.Errorf("is_final on piece %d of %d", i, len(evs))
						}
					}
					name := "StreamEventReasoningChunk"
					if tc.mode == ModeChatflow {
						name = "StreamEventChatReasoningChunk"
					}
					b, _ := json.Marshal(ev)
					var v any
					_ = json.Unmarshal(b, &v)
					if err := doc.Components.Schemas[name].Value.VisitJSON(v); err != nil {
						t.Errorf("%s does not match %s: %v", b, name, err)
					}
				}
				if tc.wantReasoning == "-" {
					if len(evs) > 0 {
						t.Errorf("unexpected reasoning_chunk events: %d", len(evs))
					}
				} else if joined.String() != tc.wantReasoning || finals != 1 {
					t.Errorf("reasoning %q with %d final pieces, want %q and 1", joined.String(), finals, tc.wantReasoning)
				}
				// Reasoning goes out before the text that follows it.
				if tc.wantReasoning != "-" && tc.wantText != "" {
					lastReason, firstText := -1, -1
					for i, e := range rec.events {
						switch x := e.(type) {
						case *ReasoningChunk:
							lastReason = i
						case *TextChunk:
							if firstText < 0 && slices.Equal(x.Data.FromVariableSelector, []string{"l", "text"}) {
								firstText = i
							}
						}
					}
					if firstText >= 0 && lastReason > firstText {
						t.Errorf("reasoning event %d after the first llm text_chunk %d", lastReason, firstText)
					}
				}
				out := rec.finished("l").Outputs
				wantText := tc.answer
				if tc.format == "separated" {
					wantText, _, _ = splitThink(tc.answer)
				}
				if out["text"] != wantText || out["reasoning_content"] != tc.wantContent {
					t.Errorf("outputs text %q reasoning_content %q, want %q, %q", out["text"], out["reasoning_content"], wantText, tc.wantContent)
				}
				if _, ok := out["structured_output"]; ok {
					t.Errorf("structured_output without the switch on: %v", out)
				}
			})
		}
	}
}

const personSchema = `{type: object, properties: {
        name: {type: string}, age: {type: integer}, score: {type: number}, ok: {type: boolean},
        tags: {type: array, items: {type: string}}, address: {type: object, properties: {city: {type: string}}, required: [city]}},
      required: [name, age]}`

func TestLLMStructuredOutput(t *testing.T) {
	structured := `, structured_output_enabled: true, structured_output: {schema: ` + personSchema + `}`
	toEnd := func(extra string) string {
		return graph(llmNode(extra)+`
  - id: end
    data: {type: end, title: End, outputs: [{variable: so, value_selector: [l, structured_output]}, {variable: text, value_selector: [l, text]},
      {variable: et, value_selector: [l, error_type]}]}`, edge("start", "source", "l"), edge("l", "source", "end"))
	}
	const good = `{"name": "Ann", "age": 3, "score": 1.5, "ok": true, "tags": ["a", "b"], "address": {"city": "Oslo"}}`
	goodObj := map[string]any{"name": "Ann", "age": float64(3), "score": 1.5, "ok": true, "tags": []any{"a", "b"}, "address": map[string]any{"city": "Oslo"}}
	tests := []struct {
		name       string
		src        string
		mode       string
		answer     string
		wantStatus string
		wantSO     any    // the structured_output reaching the end node
		wantErr    string // part of the run's (or node's) error
		wantAnswer string // chatflow answer
	}{
		{name: "a plain JSON answer", src: toEnd(structured), answer: good, wantStatus: RunSucceeded, wantSO: goodObj},
		{name: "a fenced answer with prose around it", src: toEnd(structured),
			answer:     "Sure! Here it is:\n```json\n" + good + "\n```\nAnything else? {not json}",
			wantStatus: RunSucceeded, wantSO: goodObj},
		{name: "prose with braces before the object", src: toEnd(structured),
			answer:     `I use {curly} braces; the answer: {"name": "B {x}", "age": 1}`,
			wantStatus: RunSucceeded, wantSO: map[string]any{"name": "B {x}", "age": float64(1)}},
		{name: "reasoning before the JSON is ignored", src: toEnd(structured + ", reasoning_format: separated"),
			answer:     `<think>maybe {"name": 1}</think>{"name": "C", "age": 2}`,
			wantStatus: RunSucceeded, wantSO: map[string]any{"name": "C", "age": float64(2)}},
		{name: "reasoning is ignored with tagged reasoning too", src: toEnd(structured),
			answer:     `<think>{"draft": true}</think>{"name": "C", "age": 2}`,
			wantStatus: RunSucceeded, wantSO: map[string]any{"name": "C", "age": float64(2)}},
		{name: "the older switch name works", src: toEnd(`, structured_output_switch_on: true, structured_output: {schema: ` + personSchema + `}`),
			answer: good, wantStatus: RunSucceeded, wantSO: goodObj},
		{name: "invalid JSON fails the node", src: toEnd(structured), answer: `{"name": "Ann", "age": }`,
			wantStatus: RunFailed, wantErr: "holds no valid JSON object"},
		{name: "no JSON at all fails the node", src: toEnd(structured), answer: "I cannot help with that.",
			wantStatus: RunFailed, wantErr: "holds no valid JSON object"},
		{name: "an object nested in broken JSON is not taken", src: toEnd(structured), answer: `{"x": {"name": "A", "age": 1}, oops}`,
			wantStatus: RunFailed, wantErr: "holds no valid JSON object"},
		{name: "a missing required field fails the node", src: toEnd(structured), answer: `{"name": "Ann"}`,
			wantStatus: RunFailed, wantErr: `the required field "age" is missing`},
		{name: "a missing nested required field fails the node", src: toEnd(structured), answer: `{"name": "Ann", "age": 1, "address": {}}`,
			wantStatus: RunFailed, wantErr: `the required field "address.city" is missing`},
		{name: "a wrong type fails the node", src: toEnd(structured), answer: `{"name": "Ann", "age": "three"}`,
			wantStatus: RunFailed, wantErr: `the field "age" must be integer, not string`},
		{name: "a fraction is not an integer", src: toEnd(structured), answer: `{"name": "Ann", "age": 3.5}`,
			wantStatus: RunFailed, wantErr: `the field "age" must be integer, not number`},
		{name: "a wrong array item type fails the node", src: toEnd(structured), answer: `{"name": "Ann", "age": 3, "tags": ["a", 2]}`,
			wantStatus: RunFailed, wantErr: `the field "tags[1]" must be string, not number`},
		{name: "a wrong boolean fails the node", src: toEnd(structured), answer: `{"name": "Ann", "age": 3, "ok": "yes"}`,
			wantStatus: RunFailed, wantErr: `the field "ok" must be boolean, not string`},
		{name: "default-value takes over on a structured failure",
			src: toEnd(structured + `, error_strategy: default-value, default_value: [
        {key: structured_output, type: object, value: {name: nobody, age: 0}}, {key: text, type: string, value: fallback}]`),
			answer:     `{"name": "Ann"}`,
			wantStatus: RunPartialSucceeded, wantSO: map[string]any{"name": "nobody", "age": 0}},
		{name: "fail-branch takes over on a structured failure",
			src: graph(llmNode(structured+`, error_strategy: fail-branch`)+`
  - id: ok
    data: {type: end, title: OK, outputs: [{variable: so, value_selector: [l, structured_output]}]}
  - id: bad
    data: {type: end, title: Bad, outputs: [{variable: et, value_selector: [l, error_type]}]}`,
				edge("start", "source", "l"), edge("l", "source", "ok"), edge("l", "fail-branch", "bad")),
			answer:     "no",
			wantStatus: RunPartialSucceeded},
		{name: "a structured answer streams only after it was checked",
			src: graph(llmNode(structured+`, error_strategy: default-value, default_value: [{key: text, type: string, value: fallback}]`)+`
  - id: a
    data: {type: answer, title: A, answer: 'Result: {{#l.text#}}'}`, edge("start", "source", "l"), edge("l", "source", "a")),
			mode: ModeChatflow, answer: `{"name": "Ann"}`, wantStatus: RunPartialSucceeded, wantAnswer: "Result: fallback"},
		{name: "a checked structured answer reaches the answer node",
			src: graph(llmNode(structured)+`
  - id: a
    data: {type: answer, title: A, answer: 'Result: {{#l.text#}}'}`, edge("start", "source", "l"), edge("l", "source", "a")),
			mode: ModeChatflow, answer: good, wantStatus: RunSucceeded, wantAnswer: "Result: " + good},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &chunkModel{answer: tc.answer, size: 4}
			w := graphYAML(t, tc.src)
			mode := tc.mode
			if mode == "" {
				mode = ModeWorkflow
			}
			res, rec := run1(t, &Engine{Models: &scriptedSource{model: m}}, RunInput{Workflow: w, Mode: mode, Inputs: map[string]any{"q": "who?"}})
			checkOrder(t, rec)
			if res.Status != tc.wantStatus {
				t.Fatalf("status %s (%s), want %s; trace %s", res.Status, res.Error, tc.wantStatus, rec.trace())
			}
			fin := rec.finished("l")
			if tc.wantErr != "" {
				if !strings.Contains(res.Error, tc.wantErr) {
					t.Errorf("error %q, want it to contain %q", res.Error, tc.wantErr)
				}
				if fin.Status != NodeFailed || fin.Outputs["text"] != tc.answer {
					t.Errorf("node finished %s with outputs %v, want failed with the raw text", fin.Status, fin.Outputs)
				}
			}
			if tc.wantStatus == RunPartialSucceeded {
				if fin.Status != NodeException || fin.Outputs["error_type"] != "StructuredOutputError" {
					t.Errorf("node finished %s with outputs %v, want an exception of type StructuredOutputError", fin.Status, fin.Outputs)
				}
			}
			if tc.wantSO != nil {
				if got, want := fmt.Sprint(plain(res.Outputs["so"])), fmt.Sprint(plain(tc.wantSO)); got != want {
					t.Errorf("structured_output %s, want %s", got, want)
				}
			}
			if tc.wantAnswer != "" {
				if res.Answer != tc.wantAnswer {
					t.Errorf("answer %q, want %q", res.Answer, tc.wantAnswer)
				}
				if tc.wantStatus != RunSucceeded && strings.Contains(rec.text(), "Ann") {
					t.Errorf("an unchecked answer was streamed: %q", rec.text())
				}
			}
			if tc.name == "fail-branch takes over on a structured failure" {
				if got := fmt.Sprint(res.Outputs); got != "map[et:StructuredOutputError]" {
					t.Errorf("outputs %s, want the fail branch", got)
				}
			}
		})
	}
}

// TestLLMStructuredRequest checks what the model is asked when structured
// output is on: a system instruction with the schema and a json_schema
// response format, unless the author chose a format.
func TestLLMStructuredRequest(t *testing.T) {
	tests := []struct {
		name       string
		extra      string
		prompt     string
		wantFormat any
		wantSystem int // index of the system message holding the instruction
		wantMsgs   int
	}{
		{name: "the instruction joins the system prompt and the format is set",
			extra:  `, structured_output_enabled: true, structured_output: {schema: ` + personSchema + `}`,
			prompt: `[{role: system, text: 'You help.'}, {role: user, text: '{{#start.q#}}'}]`, wantFormat: "json_schema", wantMsgs: 2},
		{name: "without a system prompt the instruction opens the conversation",
			extra:  `, structured_output_enabled: true, structured_output: {schema: ` + personSchema + `}`,
			prompt: `[{role: user, text: '{{#start.q#}}'}]`, wantFormat: "json_schema", wantMsgs: 2},
		{name: "a schema given as JSON text works too",
			extra:  `, structured_output_enabled: true, structured_output: {schema: '{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}'}`,
			prompt: `[{role: user, text: '{{#start.q#}}'}]`, wantFormat: "json_schema", wantMsgs: 2},
		{name: "the author's response format is kept",
			extra:  `, structured_output_enabled: true, structured_output: {schema: ` + personSchema + `}`,
			prompt: `[{role: user, text: '{{#start.q#}}'}]`, wantFormat: "json_object", wantMsgs: 2},
		{name: "switched off asks nothing special",
			extra:  `, structured_output_enabled: false, structured_output: {schema: ` + personSchema + `}`,
			prompt: `[{role: user, text: '{{#start.q#}}'}]`, wantFormat: nil, wantSystem: -1, wantMsgs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			params := "{temperature: 0.1}"
			if tc.wantFormat == "json_object" {
				params = "{temperature: 0.1, response_format: json_object}"
			}
			src := graph(`
  - id: l
    data: {type: llm, title: L, model: {provider: acme, name: m, mode: chat, completion_params: `+params+`},
      prompt_template: `+tc.prompt+tc.extra+`}
  - id: end
    data: {type: end, title: End, outputs: [{variable: so, value_selector: [l, structured_output]}]}`,
				edge("start", "source", "l"), edge("l", "source", "end"))
			g, err := Compile(graphYAML(t, src))
			if err != nil {
				t.Fatal(err)
			}
			data := g.byID["l"].data
			schema, _ := structuredSchema(data)
			m := &chunkModel{answer: `{"name": "Ann", "age": 1}`}
			for range 2 { // a run must not change the node's data
				res, rec := run1(t, &Engine{Models: &scriptedSource{model: m}}, RunInput{Graph: g, Inputs: map[string]any{"q": "who?"}})
				if res.Status != RunSucceeded {
					t.Fatalf("status %s (%s); trace %s", res.Status, res.Error, rec.trace())
				}
			}
			if len(m.reqs) != 2 {
				t.Fatalf("%d model calls", len(m.reqs))
			}
			for _, req := range m.reqs {
				if len(req.Messages) != tc.wantMsgs {
					t.Fatalf("messages %+v", req.Messages)
				}
				sys := req.Messages[0]
				if tc.wantSystem < 0 {
					if sys.Role == llm.RoleSystem {
						t.Errorf("unexpected system message %q", sys.Content)
					}
				} else if sys.Role != llm.RoleSystem || !strings.Contains(sys.Content, "JSON object") || !strings.Contains(sys.Content, `"name"`) {
					t.Errorf("system message %+v lacks the instruction", sys)
				} else if strings.Contains(tc.prompt, "system") && !strings.HasPrefix(sys.Content, "You help.") {
					t.Errorf("the author's system prompt was replaced: %q", sys.Content)
				}
				if got := req.Params["response_format"]; got != tc.wantFormat {
					t.Errorf("response_format %v, want %v", got, tc.wantFormat)
				}
				if tc.wantFormat == "json_schema" {
					js, _ := req.Params["json_schema"].(map[string]any)
					if js["name"] == "" || !reflect.DeepEqual(js["schema"], plain(schema)) {
						t.Errorf("json_schema %v", req.Params["json_schema"])
					}
				}
				if req.Params["temperature"] != 0.1 {
					t.Errorf("params %v lost the author's values", req.Params)
				}
			}
			if cp := asMap(asMap(data["model"])["completion_params"]); cp["json_schema"] != nil || (tc.wantFormat == "json_schema" && cp["response_format"] != nil) {
				t.Errorf("the node's completion_params were changed: %v", cp)
			}
		})
	}
}
