package workflow

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"appkb/internal/llm"
)

// Both nodes ask the model first. When the reply cannot be used — always
// the case with the builtin model, which only quotes — they fall back to a
// deterministic reading of the text, so that tests and demos route the
// same way every time:
//
//   - question-classifier picks the class whose name shares the most words
//     with the query (ties and no overlap: the first class);
//   - parameter-extractor takes, per parameter, a select option named in
//     the text, the first number, yes/no words for booleans, or the whole
//     text for strings; arrays and anything else stay unset.

var wordRe = regexp.MustCompile(`[\p{L}\p{N}]+`)

func words(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range wordRe.FindAllString(strings.ToLower(s), -1) {
		out[w] = true
	}
	return out
}

// jsonObjectIn finds the first JSON object in a model reply.
func jsonObjectIn(s string) map[string]any {
	for i := strings.Index(s, "{"); i >= 0; {
		dec := json.NewDecoder(strings.NewReader(s[i:]))
		var m map[string]any
		if dec.Decode(&m) == nil {
			return m
		}
		j := strings.Index(s[i+1:], "{")
		if j < 0 {
			break
		}
		i += j + 1
	}
	return nil
}

func (x *nodeRun) ask(system, query string) (*llm.ChatResponse, error) {
	model, params, err := x.chatModel()
	if err != nil {
		return nil, err
	}
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: system}}
	msgs = append(msgs, x.historyMessages()...)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: query})
	resp, err := model.Chat(x.ctx, llm.ChatRequest{Messages: msgs, Params: params})
	if err != nil {
		return nil, nodeErr("ModelError", "The model call failed: %v", err)
	}
	return resp, nil
}

func runClassifier(x *nodeRun) (*outcome, error) {
	cfg := x.n.cfg.(*classifierConfig)
	query := Text(x.get(cfg.query))
	classes := cfg.classes
	var list strings.Builder
	for _, c := range classes {
		fmt.Fprintf(&list, "- id %s: %s\n", c.id, c.name)
	}
	system := "Classify the user's text into exactly one of these categories and reply with JSON " +
		`{"category_id": "..."} only.` + "\n" + list.String()
	if ins := x.pool.Render(cfg.instruction); ins != "" {
		system += "\nInstructions: " + ins
	}
	resp, err := x.ask(system, query)
	if err != nil {
		return &outcome{inputs: map[string]any{"query": query}}, err
	}
	var chosen *classOption
	if m := jsonObjectIn(resp.Content); m != nil {
		for i, c := range classes {
			if c.id == Text(m["category_id"]) {
				chosen = &classes[i]
			}
		}
	}
	if chosen == nil {
		qw := words(query)
		best := -1
		for i, c := range classes {
			score := 0
			for w := range words(c.name) {
				if qw[w] {
					score++
				}
			}
			if score > best {
				best, chosen = score, &classes[i]
			}
		}
	}
	usage := usageMap(resp.Usage)
	return &outcome{
		inputs:  map[string]any{"query": query},
		process: map[string]any{"model_reply": resp.Content, "usage": usage},
		outputs: map[string]any{
			"class_name": chosen.name, "class_id": chosen.id,
			"class_label": chosen.label, "usage": usage,
		},
		handle: chosen.id, tokens: resp.Usage.TotalTokens, currency: currencyOr(resp.Usage.Currency),
	}, nil
}

var numberRe = regexp.MustCompile(`-?\d+(?:\.\d+)?`)

func runExtractor(x *nodeRun) (*outcome, error) {
	cfg := x.n.cfg.(*extractorConfig)
	query := Text(x.get(cfg.query))
	params := cfg.params
	schema := map[string]any{}
	for _, p := range params {
		schema[asString(p["name"])] = map[string]any{"type": p["type"], "description": p["description"], "options": p["options"]}
	}
	sb, _ := json.Marshal(schema)
	system := "Extract these parameters from the user's text and reply with one JSON object only: " + string(sb)
	if ins := x.pool.Render(cfg.instruction); ins != "" {
		system += "\nInstructions: " + ins
	}
	resp, err := x.ask(system, query)
	if err != nil {
		return &outcome{inputs: map[string]any{"query": query}}, err
	}
	got := jsonObjectIn(resp.Content)
	if got == nil {
		got = heuristicExtract(query, params)
	}
	outputs := map[string]any{}
	var missing []string
	for _, p := range params {
		name, typ := asString(p["name"]), asString(p["type"])
		if typ == "bool" {
			typ = TypeBoolean
		}
		if typ == "select" {
			typ = TypeString
		}
		v, ok := got[name]
		if ok && v != nil {
			v = coerce(typ, v)
		}
		if !ok || v == nil {
			if asBool(p["required"]) {
				missing = append(missing, name)
			}
			v = zeroForType(typ)
		}
		outputs[name] = v
	}
	usage := usageMap(resp.Usage)
	outputs["__is_success"] = float64(1)
	outputs["__reason"] = nil
	if len(missing) > 0 {
		outputs["__is_success"] = float64(0)
		outputs["__reason"] = "Missing required parameters: " + strings.Join(missing, ", ")
	}
	outputs["__usage"] = usage
	return &outcome{
		inputs:  map[string]any{"query": query},
		process: map[string]any{"model_reply": resp.Content, "usage": usage},
		outputs: outputs, tokens: resp.Usage.TotalTokens, currency: currencyOr(resp.Usage.Currency),
	}, nil
}

func zeroForType(t string) any {
	switch t {
	case TypeString:
		return ""
	case TypeNumber:
		return float64(0)
	case TypeBoolean:
		return false
	}
	if strings.HasPrefix(t, "array") {
		return []any{}
	}
	return nil
}

// heuristicExtract is the deterministic fallback of the extractor.
func heuristicExtract(text string, params []map[string]any) map[string]any {
	out := map[string]any{}
	lower := strings.ToLower(text)
	for _, p := range params {
		name := asString(p["name"])
		switch asString(p["type"]) {
		case "select":
			for _, o := range asAnyList(p["options"]) {
				if s := Text(o); s != "" && strings.Contains(lower, strings.ToLower(s)) {
					out[name] = s
					break
				}
			}
		case TypeNumber:
			if m := numberRe.FindString(text); m != "" {
				if f, err := strconv.ParseFloat(m, 64); err == nil {
					out[name] = f
				}
			}
		case TypeBoolean, "bool":
			ws := words(text)
			switch {
			case ws["yes"] || ws["true"]:
				out[name] = true
			case ws["no"] || ws["false"]:
				out[name] = false
			}
		case TypeString:
			if s := strings.TrimFunc(text, unicode.IsSpace); s != "" {
				out[name] = s
			}
		}
	}
	return out
}
