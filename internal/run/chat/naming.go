package chat

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"appkb/internal/llm"
	"appkb/models"
)

// Limits of a generated conversation name.
const (
	nameMaxWords = 8
	nameMaxRunes = 60
	// nameTimeout bounds the model call that names a conversation.
	nameTimeout = 20 * time.Second
	// renameDelay is how long a late title may wait to be stored with
	// other writes (see groupcommit.Queue.WriteSoon).
	renameDelay = 20 * time.Millisecond
)

// namePrompt asks a model for a conversation title.
const namePrompt = "Write a short title, at most eight words, for a conversation that begins with the user's message below. " +
	"Use the language of the message. Reply with the title alone: no quotes, no punctuation at the end, no explanation."

// startNaming begins naming a new conversation. It returns the name to store
// with the answer and, when a model was asked, a channel that later carries
// the model's name. The builtin model's name is the first words of the
// query, known at once. Another model is asked concurrently with the
// answer, and the answer does not wait for it: the conversation is stored
// with DefaultConversationName and renamed when the title arrives (see
// renameLater), as Dify names conversations in the background. A failed
// naming call falls back to the same first words.
func (g *Generation) startNaming(ctx context.Context) (string, <-chan string) {
	if !g.newConv || !g.autoName {
		return DefaultConversationName, nil
	}
	fallback := FirstWords(g.query)
	if g.builtin {
		return fallback, nil
	}
	// The title outlives the request: a blocking answer returns before it.
	ctx = context.WithoutCancel(ctx)
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
	return DefaultConversationName, ch
}

// renameLater gives the conversation the title that arrives on names, once
// the conversation is stored. A name the client set in the meantime is
// kept. The Service's background group tracks the work (see Wait).
func (g *Generation) renameLater(ctx context.Context, names <-chan string) {
	s := g.svc
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("chat: panic while renaming a conversation", "panic", v)
			}
		}()
		name := <-names
		if name == DefaultConversationName {
			return
		}
		err := s.commits.WriteSoon(ctx, func(tx *gorm.DB) error {
			_, err := models.RenameConversation(tx, g.ConversationID, DefaultConversationName, name, time.Now().UTC())
			return err
		}, renameDelay)
		if err != nil {
			s.log.Error("chat: storing the conversation name failed", "conversation_id", g.ConversationID, "error", err)
		}
	}()
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
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
