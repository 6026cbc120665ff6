package workflow

import (
	"strconv"
	"strings"
	"unicode"

	"appkb/internal/llm"
	"appkb/internal/platform/jsonnum"
)

// chatModel looks up the model an llm-like node names.
func (x *nodeRun) chatModel() (llm.ChatModel, map[string]any, error) {
	var m modelRef
	if c, ok := x.n.cfg.(modelNamer); ok {
		m = c.modelRef()
	} else {
		m = modelRefOf(x.d)
	}
	var src ModelSource = x.r.e.Models
	if src == nil {
		src = (*llm.Registry)(nil)
	}
	model, err := src.Chat(m.provider, m.name)
	if err != nil {
		return nil, nil, nodeErr("ModelError", "The model %s/%s is not available: %v", m.provider, m.name, err)
	}
	return model, m.params, nil
}

// contextOf reads an llm node's context: its text for {{#context#}} and
// the snippets handed to models that answer from knowledge.
func (x *nodeRun) contextOf(c *llmConfig) (string, []string) {
	if !c.contextOn {
		return "", nil
	}
	v := x.get(c.contextSel)
	if list, ok := asList(v); ok {
		var parts []string
		for _, it := range list {
			if m, ok := it.(map[string]any); ok && m["content"] != nil {
				parts = append(parts, Text(m["content"]))
			} else {
				parts = append(parts, Text(it))
			}
		}
		return strings.Join(parts, "\n"), parts
	}
	if s := Text(v); s != "" {
		return s, []string{s}
	}
	return "", nil
}

// promptText renders one prompt message: jinja2 or {{#…#}} text, with
// {{#context#}} replaced by the context.
func (x *nodeRun) promptText(c *llmConfig, msg promptMessage, ctxText string) (string, error) {
	if msg.jinja {
		return x.renderJinja(msg.jinjaText, c.jinjaVars)
	}
	text := strings.ReplaceAll(msg.text, "{{#context#}}", ctxText)
	return x.pool.Render(text), nil
}

// historyMessages gives the memory window of a node: the last size turns
// (a turn is a user message and the reply).
func (x *nodeRun) historyMessages() []llm.Message {
	mem := asMap(x.d["memory"])
	if mem == nil || x.r.in.Mode != ModeChatflow {
		return nil
	}
	hist := x.r.in.History
	if w := asMap(mem["window"]); w != nil && asBool(w["enabled"]) {
		if n, ok := jsonnum.Number(w["size"]); ok && n > 0 && int(n)*2 < len(hist) {
			hist = hist[len(hist)-int(n)*2:]
		}
	}
	return hist
}

func runLLM(x *nodeRun) (*outcome, error) {
	model, params, err := x.chatModel()
	if err != nil {
		return nil, err
	}
	cfg := x.n.cfg.(*llmConfig)
	ctxText, knowledge := x.contextOf(cfg)
	var msgs []llm.Message
	for _, m := range cfg.prompts {
		text, err := x.promptText(cfg, m, ctxText)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, llm.Message{Role: m.role, Content: text})
	}
	msgs = append(msgs, x.historyMessages()...)
	if cfg.memory && x.r.in.Mode == ModeChatflow {
		if q := x.pool.Render(cfg.queryTemplate); strings.TrimSpace(q) != "" {
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: q})
		}
	}
	schema, structured := cfg.schema, cfg.structured
	if structured {
		msgs = withSchemaInstruction(msgs, schema)
		params = withSchemaFormat(params, schema)
	}
	prompts := make([]any, 0, len(msgs))
	for _, m := range msgs {
		prompts = append(prompts, map[string]any{"role": m.Role, "text": m.Content})
	}
	process := map[string]any{
		"model_mode": cfg.model.mode, "prompts": prompts,
		"model_provider": cfg.model.provider, "model_name": cfg.model.name,
	}
	req := llm.ChatRequest{Messages: msgs, Params: params, Knowledge: knowledge}
	separated := cfg.separated
	plan := x.r.g.streams[x.n.id]
	if structured {
		// The answer is checked against the schema before anything shows
		// it; the answer node renders the text once the node is done.
		plan = nil
	}
	st := &llmStream{x: x, plan: plan}
	if separated {
		st.split = &thinkSplitter{}
	}
	var onChunk func(llm.Chunk) error
	if plan != nil || separated {
		onChunk = st.chunk
	}
	resp, err := model.Stream(x.ctx, req, onChunk)
	if err != nil {
		return &outcome{process: process}, nodeErr("LLMNodeError", "The model call failed: %v", err)
	}
	if onChunk != nil {
		st.finish(resp.Content)
	}
	if plan != nil {
		x.r.mu.Lock()
		x.r.streamed[x.n.id] = true
		x.r.mu.Unlock()
	}
	text, reasoning := resp.Content, ""
	if separated {
		text, reasoning, _ = splitThink(text)
	}
	usage := usageMap(resp.Usage)
	process["usage"] = usage
	process["finish_reason"] = resp.FinishReason
	price, _ := strconv.ParseFloat(resp.Usage.TotalPrice, 64)
	out := &outcome{
		inputs:  map[string]any{},
		process: process,
		outputs: map[string]any{
			"text": text, "reasoning_content": reasoning, "usage": usage, "finish_reason": resp.FinishReason,
		},
		tokens: resp.Usage.TotalTokens, price: price, currency: currencyOr(resp.Usage.Currency),
	}
	if structured {
		// Reasoning never counts as the answer, whatever the format.
		answer, _, _ := splitThink(text)
		obj, err := parseStructured(answer, schema)
		if err != nil {
			return out, err
		}
		out.outputs["structured_output"] = obj
	}
	return out, nil
}

// llmStream passes a model's pieces on while it writes: text to the
// answer or end node the text streams into (plan, may be nil), and, when
// split is set (reasoning_format "separated"), reasoning to
// reasoning_chunk events, never to the text.
type llmStream struct {
	x     *nodeRun
	plan  *streamPlan
	split *thinkSplitter
	// got is set once the model sent a piece; opened once the answer's
	// leading text went out.
	got, opened bool
}

func (s *llmStream) chunk(c llm.Chunk) error {
	if c.Delta == "" {
		return nil
	}
	s.got = true
	if s.split == nil {
		s.text(c.Delta)
		return nil
	}
	s.parts(s.split.Feed(c.Delta))
	return nil
}

// finish flushes what the splitter held back. A model that returned its
// answer without streaming it has it passed on here in one piece. The
// answer's leading text goes out even when the model wrote no text, as
// the answer node will not send it again.
func (s *llmStream) finish(content string) {
	if !s.got && content != "" {
		_ = s.chunk(llm.Chunk{Delta: content})
	}
	if s.split != nil {
		s.parts(s.split.Close())
	}
	s.open()
}

func (s *llmStream) parts(parts []thinkPart) {
	for _, p := range parts {
		if !p.reasoning {
			s.text(p.text)
			continue
		}
		id := s.x.n.id
		r := s.x.r
		r.emit(&ReasoningChunk{Envelope: r.envelope(EventReasoningChunk), Data: ReasoningChunkData{
			Reasoning: p.text, NodeID: &id, IsFinal: p.end,
		}})
	}
}

func (s *llmStream) text(t string) {
	if s.plan == nil || t == "" {
		return
	}
	s.open()
	s.x.r.textChunk(t, []string{s.x.n.id, "text"})
}

func (s *llmStream) open() {
	if s.plan == nil || s.opened {
		return
	}
	s.opened = true
	s.x.r.textChunk(s.plan.prefix, []string{s.plan.answerID, "answer"})
}

// Tags around the reasoning of models that think aloud.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkPart is one piece of an answer split by thinkSplitter, in the
// order written: answer text, or reasoning (end marks the piece that
// closes a block of reasoning; its text is empty).
type thinkPart struct {
	text      string
	reasoning bool
	end       bool
}

// thinkSplitter separates the <think>…</think> blocks of an answer that
// arrives in pieces. A tag may be cut anywhere between pieces: a tail
// that could still grow into the tag being looked for is held back until
// the next piece, or Close, settles it.
//
// The pieces add up to what splitThink gives for the whole answer: each
// block's reasoning without leading or trailing whitespace, blocks joined
// by a newline, and the text without the blocks and without the
// whitespace that follows a closing tag. A block still open at the end is
// reasoning that was cut short.
type thinkSplitter struct {
	tail    string // held back: may be the start of a tag
	inThink bool
	// started is set once the open block has shown non-space reasoning;
	// space is the whitespace at its end so far, held back in case the
	// block ends there.
	started bool
	space   string
	// trimText drops whitespace from the text after a closing tag;
	// reasoned is set once some block had reasoning.
	trimText, reasoned bool
}

// Feed splits the next piece of the answer.
func (s *thinkSplitter) Feed(delta string) []thinkPart {
	var parts []thinkPart
	buf := s.tail + delta
	s.tail = ""
	for buf != "" {
		tag := thinkOpen
		if s.inThink {
			tag = thinkClose
		}
		if i := strings.Index(buf, tag); i >= 0 {
			parts = s.add(parts, buf[:i])
			parts = s.toggle(parts)
			buf = buf[i+len(tag):]
			continue
		}
		keep := tagPrefixAtEnd(buf, tag)
		parts = s.add(parts, buf[:len(buf)-keep])
		s.tail = buf[len(buf)-keep:]
		break
	}
	return parts
}

// Close ends the answer: a held back tail is what it looked like, and a
// block left open is closed.
func (s *thinkSplitter) Close() []thinkPart {
	parts := s.add(nil, s.tail)
	s.tail = ""
	if s.inThink {
		parts = s.toggle(parts)
	}
	return parts
}

func (s *thinkSplitter) toggle(parts []thinkPart) []thinkPart {
	if !s.inThink {
		s.inThink, s.started, s.space = true, false, ""
		return parts
	}
	s.inThink, s.trimText, s.space = false, true, ""
	s.reasoned = s.reasoned || s.started
	return append(parts, thinkPart{reasoning: true, end: true})
}

func (s *thinkSplitter) add(parts []thinkPart, piece string) []thinkPart {
	if !s.inThink {
		if s.trimText {
			piece = strings.TrimLeftFunc(piece, unicode.IsSpace)
			s.trimText = piece == ""
		}
		if piece == "" {
			return parts
		}
		return append(parts, thinkPart{text: piece})
	}
	if !s.started {
		piece = strings.TrimLeftFunc(piece, unicode.IsSpace)
		if piece == "" {
			return parts
		}
		s.started = true
		if s.reasoned {
			piece = "\n" + piece
		}
	}
	piece = s.space + piece
	body := strings.TrimRightFunc(piece, unicode.IsSpace)
	s.space = piece[len(body):]
	if body == "" {
		return parts
	}
	return append(parts, thinkPart{text: body, reasoning: true})
}

// tagPrefixAtEnd is the length of the longest end of s that begins tag
// without being all of it.
func tagPrefixAtEnd(s, tag string) int {
	for k := min(len(tag)-1, len(s)); k > 0; k-- {
		if strings.HasSuffix(s, tag[:k]) {
			return k
		}
	}
	return 0
}

// splitThink splits a whole answer into its text and its reasoning, and
// says whether it had a <think> block.
func splitThink(answer string) (text, reasoning string, found bool) {
	var s thinkSplitter
	var tb, rb strings.Builder
	for _, p := range append(s.Feed(answer), s.Close()...) {
		switch {
		case p.end:
			found = true
		case p.reasoning:
			rb.WriteString(p.text)
		default:
			tb.WriteString(p.text)
		}
	}
	return tb.String(), rb.String(), found
}

func currencyOr(c string) string {
	if c == "" {
		return "USD"
	}
	return c
}

// usageMap is the usage object of llm outputs and process data.
func usageMap(u llm.Usage) map[string]any {
	dec := func(s string) string {
		if s == "" {
			return "0"
		}
		return s
	}
	return map[string]any{
		"prompt_tokens": float64(u.PromptTokens), "completion_tokens": float64(u.CompletionTokens),
		"total_tokens": float64(u.TotalTokens), "prompt_unit_price": dec(u.PromptUnitPrice),
		"prompt_price_unit": dec(u.PromptPriceUnit), "prompt_price": dec(u.PromptPrice),
		"completion_unit_price": dec(u.CompletionUnitPrice), "completion_price_unit": dec(u.CompletionPriceUnit),
		"completion_price": dec(u.CompletionPrice), "total_price": dec(u.TotalPrice),
		"currency": currencyOr(u.Currency), "latency": u.Latency.Seconds(),
	}
}
