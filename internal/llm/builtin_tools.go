package llm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// builtinToolTurn decides what the builtin model does when a request
// offers tools. The rule, deterministic so that agents work offline:
//
//   - The question is the last user message. The assistant tool calls after
//     it are the calls made in this turn; the tool messages after it are
//     their observations.
//   - A tool is named when the question contains its function name, its
//     label, or its name with "_" and "-" read as spaces, case-insensitively
//     and as whole words. Named tools are taken in the order they first
//     appear.
//   - If a named tool has not been called in this turn, the model calls the
//     first such tool, once, and says nothing else. Its arguments are, in
//     this order of preference: a JSON object written right after the
//     mention (after spaces or a colon); else every parameter written as
//     name=value or name: value (quotes optional, the value ends at a comma,
//     semicolon or line end), converted to the parameter's type; else, for
//     a tool with one parameter, the text after the mention; when nothing
//     follows it, the whole question if that parameter is required, else
//     no arguments.
//   - Otherwise, when this turn has observations, the answer is made of
//     them: the one observation as it is, or one "tool: observation" line
//     per call. With no tool named and no observation the usual builtin
//     answer is given.
//
// The last rule also holds for a request that offers no tools, such as the
// last round of an agent that reached its iteration limit. ok is false when
// the builtin model should answer as usual.
func builtinToolTurn(req ChatRequest) (call *ToolCall, answer string, ok bool) {
	last := -1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == RoleUser {
			last = i
			break
		}
	}
	if last < 0 {
		return nil, "", false
	}
	question := req.Messages[last].Content
	called := map[string]bool{}
	var observations []Message
	for _, m := range req.Messages[last+1:] {
		for _, c := range m.ToolCalls {
			called[c.Name] = true
		}
		if m.Role == RoleTool {
			observations = append(observations, m)
		}
	}
	type mention struct {
		tool     Tool
		from, to int
	}
	var named []mention
	for _, t := range req.Tools {
		best := mention{from: -1}
		for _, alias := range toolAliases(t) {
			re := regexp.MustCompile(`(?i)(^|[^\pL\pN_])(` + regexp.QuoteMeta(alias) + `)($|[^\pL\pN_])`)
			if loc := re.FindStringSubmatchIndex(question); loc != nil && (best.from < 0 || loc[4] < best.from) {
				best = mention{tool: t, from: loc[4], to: loc[5]}
			}
		}
		if best.from >= 0 {
			named = append(named, best)
		}
	}
	sort.SliceStable(named, func(i, j int) bool { return named[i].from < named[j].from })
	for _, m := range named {
		if called[m.tool.Name] {
			continue
		}
		args := toolArguments(m.tool, question, m.to)
		data, _ := json.Marshal(args)
		id := fmt.Sprintf("call_%d_%s", len(called)+1, m.tool.Name)
		return &ToolCall{ID: id, Name: m.tool.Name, Arguments: string(data)}, "", true
	}
	switch len(observations) {
	case 0:
		return nil, "", false
	case 1:
		return nil, observations[0].Content, true
	}
	lines := make([]string, len(observations))
	for i, o := range observations {
		lines[i] = o.Name + ": " + o.Content
	}
	return nil, strings.Join(lines, "\n"), true
}

// toolAliases are the spellings that name a tool.
func toolAliases(t Tool) []string {
	out := []string{t.Name}
	if spaced := strings.NewReplacer("_", " ", "-", " ").Replace(t.Name); spaced != t.Name {
		out = append(out, spaced)
	}
	if l := strings.TrimSpace(t.Label); l != "" && l != t.Name {
		out = append(out, l)
	}
	return out
}

var argPairRe = regexp.MustCompile(`^\s*(?:=|:)\s*("([^"]*)"|'([^']*)'|([^,;\n]*))`)

// toolArguments reads the arguments of a call from the question; after is
// where the tool's mention ends.
func toolArguments(t Tool, question string, after int) map[string]any {
	rest := question[after:]
	trimmed := strings.TrimLeft(rest, " \t\r\n:")
	if strings.HasPrefix(trimmed, "{") {
		var obj map[string]any
		if err := json.NewDecoder(strings.NewReader(trimmed)).Decode(&obj); err == nil && obj != nil {
			return obj
		}
	}
	props, _ := t.Parameters["properties"].(map[string]any)
	args := map[string]any{}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		re := regexp.MustCompile(`(?i)(^|[^\pL\pN_])` + regexp.QuoteMeta(name) + `\s*(?:=|:)`)
		loc := re.FindStringIndex(question)
		if loc == nil {
			continue
		}
		m := argPairRe.FindStringSubmatch(question[loc[1]-1:])
		if m == nil {
			continue
		}
		val := strings.TrimSpace(m[4])
		if m[2] != "" || strings.HasPrefix(m[1], `"`) {
			val = m[2]
		} else if m[3] != "" || strings.HasPrefix(m[1], "'") {
			val = m[3]
		}
		args[name] = typedArgument(props[name], val)
	}
	if len(args) > 0 || len(props) != 1 {
		return args
	}
	text := strings.Trim(strings.TrimSpace(trimmed), `"'`)
	if text == "" && isRequired(t.Parameters, names[0]) {
		text = strings.TrimSpace(question)
	}
	if text != "" {
		args[names[0]] = typedArgument(props[names[0]], text)
	}
	return args
}

// typedArgument converts text to the type a schema property declares.
func typedArgument(prop any, text string) any {
	p, _ := prop.(map[string]any)
	switch p["type"] {
	case "number", "integer":
		if f, err := strconv.ParseFloat(text, 64); err == nil {
			return f
		}
	case "boolean":
		if b, err := strconv.ParseBool(text); err == nil {
			return b
		}
	case "array":
		var out []any
		for _, s := range strings.Split(text, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return text
}

// isRequired reports whether a JSON schema requires the property.
func isRequired(schema map[string]any, name string) bool {
	switch r := schema["required"].(type) {
	case []any:
		for _, e := range r {
			if e == name {
				return true
			}
		}
	case []string:
		for _, e := range r {
			if e == name {
				return true
			}
		}
	}
	return false
}
