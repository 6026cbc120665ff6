package workflow

import (
	"regexp"
	"strconv"
	"strings"

	"appkb/apps"
	"appkb/llm"
)

func init() {
	executors[apps.NodeLLM] = runLLM
}

// chatModel looks up the model an llm-like node names.
func (x *nodeRun) chatModel() (llm.ChatModel, map[string]any, error) {
	m := asMap(x.d["model"])
	var src ModelSource = x.r.e.Models
	if src == nil {
		src = (*llm.Registry)(nil)
	}
	model, err := src.Chat(asString(m["provider"]), asString(m["name"]))
	if err != nil {
		return nil, nil, nodeErr("ModelError", "The model %s/%s is not available: %v", asString(m["provider"]), asString(m["name"]), err)
	}
	params := asMap(m["completion_params"])
	return model, params, nil
}

// contextOf reads an llm node's context: its text for {{#context#}} and
// the snippets handed to models that answer from knowledge.
func (x *nodeRun) contextOf() (string, []string) {
	c := asMap(x.d["context"])
	if c == nil || !asBool(c["enabled"]) {
		return "", nil
	}
	v := x.get(selectorOf(c["variable_selector"]))
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
func (x *nodeRun) promptText(msg map[string]any, ctxText string) (string, error) {
	if asString(msg["edition_type"]) == "jinja2" {
		vars := asList2(asMap(x.d["prompt_config"])["jinja2_variables"])
		return x.renderJinja(asString(msg["jinja2_text"]), vars)
	}
	text := strings.ReplaceAll(asString(msg["text"]), "{{#context#}}", ctxText)
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
		if n, ok := parseNumber(w["size"]); ok && n > 0 && int(n)*2 < len(hist) {
			hist = hist[len(hist)-int(n)*2:]
		}
	}
	return hist
}

var thinkTag = regexp.MustCompile(`(?s)<think>(.*?)</think>\s*`)

func runLLM(x *nodeRun) (*outcome, error) {
	model, params, err := x.chatModel()
	if err != nil {
		return nil, err
	}
	ctxText, knowledge := x.contextOf()
	var msgs []llm.Message
	switch pt := x.d["prompt_template"].(type) {
	case []any:
		for _, m := range asList2(pt) {
			text, err := x.promptText(m, ctxText)
			if err != nil {
				return nil, err
			}
			role := asString(m["role"])
			if role == "" {
				role = llm.RoleUser
			}
			msgs = append(msgs, llm.Message{Role: role, Content: text})
		}
	case map[string]any:
		text, err := x.promptText(pt, ctxText)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: text})
	}
	msgs = append(msgs, x.historyMessages()...)
	if mem := asMap(x.d["memory"]); mem != nil && x.r.in.Mode == ModeChatflow {
		tmpl := asString(mem["query_prompt_template"])
		if tmpl == "" {
			tmpl = "{{#sys.query#}}"
		}
		if q := x.pool.Render(tmpl); strings.TrimSpace(q) != "" {
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: q})
		}
	}
	prompts := make([]any, 0, len(msgs))
	for _, m := range msgs {
		prompts = append(prompts, map[string]any{"role": m.Role, "text": m.Content})
	}
	mdl := asMap(x.d["model"])
	process := map[string]any{
		"model_mode": asString(mdl["mode"]), "prompts": prompts,
		"model_provider": asString(mdl["provider"]), "model_name": asString(mdl["name"]),
	}
	req := llm.ChatRequest{Messages: msgs, Params: params, Knowledge: knowledge}
	plan := x.r.g.streams[x.n.id]
	var onChunk func(llm.Chunk) error
	if plan != nil {
		first := true
		onChunk = func(c llm.Chunk) error {
			if c.Delta == "" {
				return nil
			}
			if first {
				first = false
				x.r.textChunk(plan.prefix, []string{plan.answerID, "answer"})
			}
			x.r.textChunk(c.Delta, []string{x.n.id, "text"})
			return nil
		}
	}
	resp, err := model.Stream(x.ctx, req, onChunk)
	if err != nil {
		return &outcome{process: process}, nodeErr("LLMNodeError", "The model call failed: %v", err)
	}
	if plan != nil {
		x.r.mu.Lock()
		x.r.streamed[x.n.id] = true
		x.r.mu.Unlock()
	}
	text, reasoning := resp.Content, ""
	if asString(x.d["reasoning_format"]) == "separated" {
		if m := thinkTag.FindStringSubmatch(text); m != nil {
			reasoning = strings.TrimSpace(m[1])
			text = thinkTag.ReplaceAllString(text, "")
		}
	}
	usage := usageMap(resp.Usage)
	process["usage"] = usage
	process["finish_reason"] = resp.FinishReason
	price, _ := strconv.ParseFloat(resp.Usage.TotalPrice, 64)
	return &outcome{
		inputs:  map[string]any{},
		process: process,
		outputs: map[string]any{
			"text": text, "reasoning_content": reasoning, "usage": usage, "finish_reason": resp.FinishReason,
		},
		tokens: resp.Usage.TotalTokens, price: price, currency: currencyOr(resp.Usage.Currency),
	}, nil
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
