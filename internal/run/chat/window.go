package chat

import "strings"

// contextWindows maps model name prefixes to context sizes in tokens. The
// model layer does not report context sizes, so this table covers common
// families; the longest matching prefix wins. It only needs to be roughly
// right: it decides how much conversation history is sent.
var contextWindows = []struct {
	prefix string
	tokens int
}{
	{"gpt-3.5-turbo", 16385},
	{"gpt-4", 8192},
	{"gpt-4-turbo", 128000},
	{"gpt-4o", 128000},
	{"gpt-4.1", 1047576},
	{"gpt-5", 400000},
	{"o1", 200000},
	{"o3", 200000},
	{"o4", 200000},
	{"claude", 200000},
	{"deepseek", 64000},
	{"qwen", 32768},
	{"llama3", 8192},
	{"llama3.1", 128000},
	{"llama3.2", 128000},
	{"mistral", 32768},
	{"gemini", 1048576},
	{"builtin", 8192},
}

// fallbackContextWindow is used for models the table does not know.
const fallbackContextWindow = 4096

// DefaultContextWindow guesses a model's context size from its name.
func DefaultContextWindow(model string) int {
	name := strings.ToLower(strings.TrimSpace(model))
	if name == "" {
		name = "builtin"
	}
	best, tokens := -1, fallbackContextWindow
	for _, w := range contextWindows {
		if strings.HasPrefix(name, w.prefix) && len(w.prefix) > best {
			best, tokens = len(w.prefix), w.tokens
		}
	}
	return tokens
}
