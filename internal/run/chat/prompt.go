package chat

import (
	"regexp"
	"strings"
	"sync"

	"appkb/internal/apps"
	"appkb/internal/llm"
)

// Turn is one earlier exchange of a conversation: what the user asked and
// what the app answered.
type Turn struct {
	Query  string
	Answer string
}

// PromptParams is everything a prompt is assembled from.
type PromptParams struct {
	// AppMode is the app's mode; only chat-like apps get history.
	AppMode string
	Config  *apps.ModelConfig
	// Inputs are the validated form values (see ValidateInputs).
	Inputs map[string]any
	Query  string
	// History holds the conversation's earlier turns, oldest first.
	History []Turn
	// Context is the retrieved knowledge text that fills {{#context#}}.
	Context string
	// ContextWindow is how many tokens the model accepts in all; 0 or less
	// means "no limit", and then every history turn is kept.
	ContextWindow int
	// ReserveTokens is kept free for the answer.
	ReserveTokens int
}

// Prompt is an assembled prompt.
type Prompt struct {
	Messages []llm.Message
	// HistoryTurns is how many of the newest history turns fitted.
	HistoryTurns int
}

// Placeholders with a fixed meaning in prompt templates.
const (
	varContext   = "#context#"
	varQuery     = "#query#"
	varHistories = "#histories#"
)

// templateVar matches a {{variable}} placeholder: a form variable name of at
// most 30 characters, or one of the special names.
var templateVar = regexp.MustCompile(`\{\{([a-zA-Z_][a-zA-Z0-9_]{0,29}|#histories#|#query#|#context#)\}\}`)

// RenderTemplate replaces the {{name}} placeholders of text with the values
// in vars. Placeholders without a value are left as written. Placeholders
// inside the values are defused ({{x}} becomes {x}) so that a user cannot
// smuggle a reference to another variable into the prompt.
func RenderTemplate(text string, vars map[string]string) string {
	if !strings.Contains(text, "{{") {
		return text
	}
	return templateVar.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-2]
		v, ok := vars[name]
		if !ok {
			return m
		}
		return templateVar.ReplaceAllString(v, "{$1}")
	})
}

// Fixed prompt texts. The knowledge block is only added when there is
// knowledge, which for now is never (see Generation.Run).
const (
	contextPromptText = "Use the knowledge between the <context></context> tags below as what you know.\n\n" +
		"<context>\n{{#context#}}\n</context>\n\n" +
		"When you answer:\n- say that you do not know when the knowledge does not tell you;\n" +
		"- ask for clarification when you are not sure;\n" +
		"- do not mention that the knowledge was given to you;\n" +
		"- answer in the language of the question.\n\n"
	historiesPromptText = "Here is the conversation so far between the human and the assistant, between the <histories></histories> tags.\n\n" +
		"<histories>\n{{#histories#}}\n</histories>\n\n"
	humanPrefix     = "Human"
	assistantPrefix = "Assistant"
)

// BuildPrompt assembles the messages sent to the model.
//
// Simple mode uses the app's pre_prompt: on a chat model it becomes the
// system message, followed by the history and the query as the last user
// message (with no query, the pre_prompt itself is the user message); on a
// completion model everything, history included, is written into one text.
// Advanced mode uses the app's message list (chat models) or prompt text
// (completion models), with the history placed before the query or at
// {{#histories#}}.
//
// History is trimmed from the oldest end until the prompt fits in
// ContextWindow minus ReserveTokens, counted with llm.CountMessages; what
// is left of the prompt is never trimmed.
func BuildPrompt(p PromptParams) Prompt {
	mc := p.Config
	if mc == nil {
		mc = &apps.ModelConfig{}
	}
	vars := make(map[string]string, len(p.Inputs)+2)
	for k, v := range p.Inputs {
		vars[k] = formatValue(v)
	}
	vars[varContext] = p.Context
	vars[varQuery] = p.Query

	history := p.History
	if !isChatMode(p.AppMode) {
		history = nil
	}
	limit := 0
	if p.ContextWindow > 0 {
		limit = max(p.ContextWindow-p.ReserveTokens, 1)
	}
	completionModel := mc.Model.Mode == "completion"
	if mc.PromptType == "advanced" {
		if completionModel {
			return advancedCompletionPrompt(mc, vars, history, limit)
		}
		return advancedChatPrompt(mc, vars, p.Query, history, limit)
	}
	if completionModel {
		return simpleCompletionPrompt(p.AppMode, mc, vars, p.Query, p.Context, history, limit)
	}
	return simpleChatPrompt(mc, vars, p.Query, p.Context, history, limit)
}

// simpleChatPrompt: system (knowledge + pre_prompt), history, query.
func simpleChatPrompt(mc *apps.ModelConfig, vars map[string]string, query, context string, history []Turn, limit int) Prompt {
	var prompt strings.Builder
	if context != "" {
		prompt.WriteString(RenderTemplate(contextPromptText, vars))
	}
	prompt.WriteString(RenderTemplate(mc.PrePrompt, vars))
	text := strings.TrimSpace(prompt.String())

	var head, tail []llm.Message
	switch {
	case query != "":
		if text != "" {
			head = append(head, llm.Message{Role: llm.RoleSystem, Content: text})
		}
		tail = append(tail, llm.Message{Role: llm.RoleUser, Content: query})
	default:
		tail = append(tail, llm.Message{Role: llm.RoleUser, Content: text})
	}
	return withHistoryMessages(head, tail, history, limit)
}

// advancedChatPrompt: the app's messages, then history, then the query.
func advancedChatPrompt(mc *apps.ModelConfig, vars map[string]string, query string, history []Turn, limit int) Prompt {
	var head, tail []llm.Message
	for _, pm := range mc.ChatPromptConfig.Prompt {
		role := pm.Role
		switch role {
		case llm.RoleSystem, llm.RoleUser, llm.RoleAssistant:
		default:
			role = llm.RoleUser
		}
		head = append(head, llm.Message{Role: role, Content: RenderTemplate(pm.Text, vars)})
	}
	if query != "" {
		tail = append(tail, llm.Message{Role: llm.RoleUser, Content: query})
	}
	if len(head) == 0 && len(tail) == 0 {
		tail = append(tail, llm.Message{Role: llm.RoleUser, Content: ""})
	}
	return withHistoryMessages(head, tail, history, limit)
}

// withHistoryMessages puts as many of the newest history turns between head
// and tail as fit in limit tokens.
func withHistoryMessages(head, tail []llm.Message, history []Turn, limit int) Prompt {
	keep := len(history)
	if limit > 0 && keep > 0 {
		used := llm.CountMessages(append(append([]llm.Message{}, head...), tail...))
		keep = 0
		for i := len(history) - 1; i >= 0; i-- {
			cost := llm.CountMessages(turnMessages(history[i])) - replyOverhead()
			if used+cost > limit {
				break
			}
			used += cost
			keep++
		}
	}
	msgs := make([]llm.Message, 0, len(head)+2*keep+len(tail))
	msgs = append(msgs, head...)
	for _, t := range history[len(history)-keep:] {
		msgs = append(msgs, turnMessages(t)...)
	}
	msgs = append(msgs, tail...)
	return Prompt{Messages: msgs, HistoryTurns: keep}
}

func turnMessages(t Turn) []llm.Message {
	return []llm.Message{
		{Role: llm.RoleUser, Content: t.Query},
		{Role: llm.RoleAssistant, Content: t.Answer},
	}
}

// replyOverhead is the part of llm.CountMessages that is charged once per
// prompt rather than per message; the difference between counting two lists
// apart and together gives it.
var replyOverhead = sync.OnceValue(func() int {
	one := []llm.Message{{Role: llm.RoleUser, Content: "a"}}
	return 2*llm.CountMessages(one) - llm.CountMessages(append(one, one...))
})

// simpleCompletionPrompt writes a simple-mode prompt for a completion model
// as one text: knowledge, pre_prompt, history (chat apps) and the query.
func simpleCompletionPrompt(mode string, mc *apps.ModelConfig, vars map[string]string, query, context string, history []Turn, limit int) Prompt {
	var fixed strings.Builder
	if context != "" {
		fixed.WriteString(RenderTemplate(contextPromptText, vars))
	}
	fixed.WriteString(RenderTemplate(mc.PrePrompt, vars))
	var queryPart string
	switch {
	case isChatMode(mode):
		queryPart = "\n\n" + humanPrefix + ": " + query + "\n\n" + assistantPrefix + ": "
	case query != "":
		queryPart = "\n\n" + query
	}
	build := func(keep int) string {
		var b strings.Builder
		b.WriteString(fixed.String())
		if keep > 0 {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(RenderTemplate(historiesPromptText, map[string]string{
				varHistories: historyText(history[len(history)-keep:], humanPrefix, assistantPrefix),
			}))
		}
		b.WriteString(queryPart)
		return b.String()
	}
	keep := fitHistoryText(history, limit, func(keep int) int {
		return llm.CountMessages([]llm.Message{{Role: llm.RoleUser, Content: build(keep)}})
	})
	return Prompt{Messages: []llm.Message{{Role: llm.RoleUser, Content: build(keep)}}, HistoryTurns: keep}
}

// advancedCompletionPrompt renders the app's prompt text for a completion
// model; the history goes where {{#histories#}} stands.
func advancedCompletionPrompt(mc *apps.ModelConfig, vars map[string]string, history []Turn, limit int) Prompt {
	cfg := mc.CompletionPromptConfig
	user, assistant := cfg.ConversationHistoriesRole.UserPrefix, cfg.ConversationHistoriesRole.AssistantPrefix
	if user == "" {
		user = humanPrefix
	}
	if assistant == "" {
		assistant = assistantPrefix
	}
	text := cfg.Prompt.Text
	if !strings.Contains(text, "{{"+varHistories+"}}") {
		history = nil
	}
	build := func(keep int) string {
		v := make(map[string]string, len(vars)+1)
		for k, s := range vars {
			v[k] = s
		}
		v[varHistories] = historyText(history[len(history)-keep:], user, assistant)
		return RenderTemplate(text, v)
	}
	keep := fitHistoryText(history, limit, func(keep int) int {
		return llm.CountMessages([]llm.Message{{Role: llm.RoleUser, Content: build(keep)}})
	})
	return Prompt{Messages: []llm.Message{{Role: llm.RoleUser, Content: build(keep)}}, HistoryTurns: keep}
}

// fitHistoryText finds the largest number of newest turns whose prompt,
// as counted by size, stays within limit. The prompt grows with every turn,
// so a binary search finds it with few counts.
func fitHistoryText(history []Turn, limit int, size func(keep int) int) int {
	if limit <= 0 || len(history) == 0 {
		return len(history)
	}
	lo, hi := 0, len(history)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if size(mid) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// historyText writes turns as "Human: …\nAssistant: …" lines.
func historyText(turns []Turn, user, assistant string) string {
	var b strings.Builder
	for i, t := range turns {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(user + ": " + t.Query + "\n" + assistant + ": " + t.Answer)
	}
	return b.String()
}

// isChatMode reports the modes that hold conversations.
func isChatMode(mode string) bool {
	switch mode {
	case apps.ModeChat, apps.ModeAgentChat, apps.ModeAdvancedChat, apps.ModeAgent:
		return true
	}
	return false
}
