package chat

import (
	"strings"

	"appkb/internal/apps"
)

// Replies used when an app switches a check on but leaves its preset reply
// empty.
const (
	defaultInputPreset  = "Your message contains content this app cannot respond to."
	defaultOutputPreset = "The answer was withheld because it contains content this app may not show."
)

// maxKeywords bounds the keyword list, as Dify does.
const maxKeywords = 100

// keywordFilter is the sensitive_word_avoidance feature of the "keywords"
// kind: inputs or answers that contain one of the words (compared without
// regard to case) are replaced by a preset reply. Other kinds (an OpenAI
// moderation model, an API extension) are not applied yet.
type keywordFilter struct {
	keywords     []string
	inputs       bool
	inputPreset  string
	outputs      bool
	outputPreset string
}

// newKeywordFilter reads the feature; it returns nil when nothing is to be
// checked.
func newKeywordFilter(m *apps.Moderation) *keywordFilter {
	if m == nil || !m.Enabled || m.Type != "keywords" || m.Config == nil {
		return nil
	}
	f := &keywordFilter{}
	var raw []string
	switch kw := m.Config["keywords"].(type) {
	case string:
		raw = strings.Split(kw, "\n")
	case []any:
		for _, k := range kw {
			if s, ok := k.(string); ok {
				raw = append(raw, s)
			}
		}
	}
	for _, k := range raw {
		if k = strings.ToLower(strings.TrimSpace(k)); k != "" && len(f.keywords) < maxKeywords {
			f.keywords = append(f.keywords, k)
		}
	}
	f.inputs, f.inputPreset = direction(m.Config["inputs_config"], defaultInputPreset)
	f.outputs, f.outputPreset = direction(m.Config["outputs_config"], defaultOutputPreset)
	if len(f.keywords) == 0 || (!f.inputs && !f.outputs) {
		return nil
	}
	return f
}

// direction reads an inputs_config or outputs_config block.
func direction(v any, fallback string) (bool, string) {
	m, ok := v.(map[string]any)
	if !ok {
		return false, ""
	}
	on, _ := m["enabled"].(bool)
	preset, _ := m["preset_response"].(string)
	if strings.TrimSpace(preset) == "" {
		preset = fallback
	}
	return on, preset
}

func (f *keywordFilter) hit(text string) bool {
	lower := strings.ToLower(text)
	for _, k := range f.keywords {
		if strings.Contains(lower, k) {
			return true
		}
	}
	return false
}

// checkInputs returns the preset reply when the query or an input value
// contains a keyword.
func (f *keywordFilter) checkInputs(query string, inputs map[string]any) (string, bool) {
	if f == nil || !f.inputs {
		return "", false
	}
	if f.hit(query) {
		return f.inputPreset, true
	}
	for _, v := range inputs {
		if f.hit(formatValue(v)) {
			return f.inputPreset, true
		}
	}
	return "", false
}

// checkOutput returns the preset reply when the answer contains a keyword.
func (f *keywordFilter) checkOutput(answer string) (string, bool) {
	if f == nil || !f.outputs || !f.hit(answer) {
		return "", false
	}
	return f.outputPreset, true
}
