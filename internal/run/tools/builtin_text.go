package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// ---- text ----

var toolRegexExtract = &Tool{
	Provider: "regex", Name: "regex_extract",
	Description: "Finds every match of a regular expression in a text.",
	Params: []Param{
		{Name: "content", Type: paramString, Required: true, LLM: true, Description: "The text to search."},
		{Name: "expression", Type: paramString, Required: true, LLM: true, Description: "The regular expression (RE2 syntax)."},
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		re, err := regexp.Compile(strings.TrimSpace(str(args, "expression")))
		if err != nil {
			return nil, fmt.Errorf("bad regular expression: %v", err)
		}
		// Like findall: the whole match without groups, the group with
		// one, and a list of groups with several.
		matches := []any{}
		for _, m := range re.FindAllStringSubmatch(strings.TrimSpace(str(args, "content")), -1) {
			switch len(m) {
			case 1:
				matches = append(matches, m[0])
			case 2:
				matches = append(matches, m[1])
			default:
				groups := make([]any, len(m)-1)
				for i, g := range m[1:] {
					groups[i] = g
				}
				matches = append(matches, groups)
			}
		}
		data, _ := json.Marshal(matches)
		return &Output{Text: string(data), JSON: []any{map[string]any{"matches": matches}}, Vars: map[string]any{"matches": matches}}, nil
	},
}

var toolTextReplace = &Tool{
	Provider: "text", Name: "text_replace",
	Description: "Replaces every occurrence of a text, or of a regular expression, in a text.",
	Params: []Param{
		{Name: "text", Type: paramString, LLM: true, Description: "The text to change."},
		{Name: "find", Type: paramString, Required: true, LLM: true, Description: "What to replace."},
		{Name: "replace", Type: paramString, LLM: true, Description: "The replacement; with use_regex, $1 names a group."},
		{Name: "use_regex", Type: paramBoolean, Default: false, Description: "Read find as a regular expression (RE2 syntax)."},
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		text, find, repl := str(args, "text"), str(args, "find"), str(args, "replace")
		if !flag(args, "use_regex") {
			return textOut(strings.ReplaceAll(text, find, repl)), nil
		}
		re, err := regexp.Compile(find)
		if err != nil {
			return nil, fmt.Errorf("bad regular expression: %v", err)
		}
		return textOut(re.ReplaceAllString(text, repl)), nil
	},
}

var toolTextSplit = &Tool{
	Provider: "text", Name: "text_split",
	Description: "Splits a text at a separator.",
	Params: []Param{
		{Name: "text", Type: paramString, LLM: true, Description: "The text to split."},
		{Name: "separator", Type: paramString, Default: `\n`, Description: `Where to split; \n and \t stand for a new line and a tab.`},
		{Name: "trim", Type: paramBoolean, Default: true, Description: "Trim blank space around parts and drop empty ones."},
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		sep := strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(str(args, "separator"))
		parts := []any{}
		var lines []string
		for _, p := range strings.Split(str(args, "text"), sep) {
			if flag(args, "trim") {
				if p = strings.TrimSpace(p); p == "" {
					continue
				}
			}
			parts = append(parts, p)
			lines = append(lines, p)
		}
		return &Output{Text: strings.Join(lines, "\n"), Vars: map[string]any{"parts": parts}}, nil
	},
}

var toolTextStats = &Tool{
	Provider: "text", Name: "text_stats",
	Description: "Counts the characters, words and lines of a text.",
	Params: []Param{
		{Name: "text", Type: paramString, LLM: true, Description: "The text to count."},
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		text := str(args, "text")
		lines := 0
		if text != "" {
			lines = strings.Count(text, "\n") + 1
		}
		stats := map[string]any{
			"characters": float64(utf8.RuneCountInString(text)),
			"words":      float64(len(strings.Fields(text))),
			"lines":      float64(lines),
		}
		return &Output{
			Text: fmt.Sprintf("%d characters, %d words, %d lines", utf8.RuneCountInString(text), len(strings.Fields(text)), lines),
			JSON: []any{stats}, Vars: stats,
		}, nil
	},
}
