package chat

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"appkb/llm"
)

// Limits of a generated conversation name.
const (
	nameMaxWords = 8
	nameMaxRunes = 60
	// nameTimeout bounds the model call that names a conversation.
	nameTimeout = 20 * time.Second
)

// namePrompt asks a model for a conversation title.
const namePrompt = "Write a short title, at most eight words, for a conversation that begins with the user's message below. " +
	"Use the language of the message. Reply with the title alone: no quotes, no punctuation at the end, no explanation."

// startNaming begins naming a new conversation and returns a function that
// waits for the name. The builtin model's name is the first words of the
// query; another model is asked, concurrently with the answer, and its
// failure falls back to the same first words.
func (g *Generation) startNaming(ctx context.Context) func() string {
	if !g.newConv || !g.autoName {
		return func() string { return DefaultConversationName }
	}
	fallback := FirstWords(g.query)
	if g.builtin {
		return func() string { return fallback }
	}
	ch := make(chan string, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil { // a broken model must not end the process
				g.svc.log.Error("chat: panic while naming a conversation", "panic", v)
				ch <- fallback
			}
		}()
		ctx, cancel := context.WithTimeout(ctx, nameTimeout)
		defer cancel()
		resp, err := g.model.Chat(ctx, llm.ChatRequest{
			Messages: []llm.Message{
				{Role: llm.RoleSystem, Content: namePrompt},
				{Role: llm.RoleUser, Content: g.query},
			},
			Params: map[string]any{"max_tokens": 32, "temperature": 0},
		})
		name := ""
		if err == nil {
			name = cleanName(resp.Content)
		} else {
			g.svc.log.Debug("chat: naming the conversation failed", "conversation_id", g.ConversationID, "error", err)
		}
		if name == "" {
			name = fallback
		}
		ch <- name
	}()
	return func() string { return <-ch }
}

// FirstWords names a conversation after its first query: its first few
// words, cut to a reasonable length. An empty query gives
// DefaultConversationName.
func FirstWords(query string) string {
	words := strings.Fields(query)
	if len(words) == 0 {
		return DefaultConversationName
	}
	var b strings.Builder
	for i, w := range words {
		if i == nameMaxWords {
			break
		}
		if i > 0 {
			if utf8.RuneCountInString(b.String())+1+utf8.RuneCountInString(w) > nameMaxRunes {
				break
			}
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return truncateRunes(b.String(), nameMaxRunes)
}

// cleanName tidies a model's title: first line, no surrounding quotes,
// bounded length.
func cleanName(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.Trim(strings.TrimSpace(s), "\"'“”‘’`*#")
	s = strings.TrimSpace(strings.TrimPrefix(s, "Title:"))
	return truncateRunes(s, nameMaxRunes)
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
