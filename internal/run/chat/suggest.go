package chat

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"appkb/internal/llm"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// Limits of suggested questions.
const (
	maxSuggestions     = 3
	suggestionTurns    = 3
	maxSuggestionRunes = 200
	suggestionTimeout  = 30 * time.Second
)

// suggestPrompt asks a model for follow-up questions as a JSON array.
const suggestPrompt = "Read the conversation below and predict the three questions the user is most likely to ask next. " +
	"Keep each question short (under 20 words) and in the language of the conversation. " +
	"Reply with a JSON array of three strings and nothing else, for example [\"question 1\",\"question 2\",\"question 3\"]."

// SuggestedQuestions proposes questions the user might ask after message
// messageID. It fails with not_chat_app for apps without conversations,
// bad_request when the app has the feature switched off, and not_found
// when the message is not the user's. A model that answers with something
// other than a list of questions gives an empty list.
//
// The builtin model cannot predict anything; it proposes three questions
// made from the message's query by fixed patterns, so that demos and tests
// see the feature work.
func (s *Service) SuggestedQuestions(ctx context.Context, appID, user, messageID string) ([]string, error) {
	_, ac, err := s.loadApp(ctx, appID, nil)
	if err != nil {
		return nil, err
	}
	if !isChatMode(ac.mode) {
		return nil, apperr.Fail(apperr.CodeNotChatApp, "App mode %s does not hold conversations; this operation is for chat apps.", ac.mode)
	}
	if !ac.features.SuggestedQuestionsAfterAnswer.On() {
		return nil, apperr.Fail(apperr.CodeBadRequest, "Suggested questions after an answer are switched off for this app.")
	}
	msg, err := s.findMessage(ctx, appID, user, messageID)
	if err != nil {
		return nil, err
	}
	if ac.mc == nil {
		return []string{}, nil
	}
	spec := ac.mc.Model
	model, err := s.cfg.Models.Chat(spec.Provider, spec.Name)
	if err != nil {
		return nil, err
	}
	if backend, _ := s.cfg.Models.Backend(spec.Provider); backend == llm.BackendBuiltin {
		return builtinSuggestions(msg.Query), nil
	}

	turns, err := s.turnsUpTo(ctx, msg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, suggestionTimeout)
	defer cancel()
	resp, err := model.Chat(ctx, llm.ChatRequest{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: suggestPrompt},
			{Role: llm.RoleUser, Content: historyText(turns, humanPrefix, assistantPrefix)},
		},
		Params: map[string]any{"max_tokens": 256, "temperature": 0},
	})
	if err != nil {
		s.log.Warn("chat: suggesting questions failed", "message_id", messageID, "error", err)
		return []string{}, nil
	}
	return parseSuggestions(resp.Content), nil
}

// findMessage returns a message of the app that user sent.
func (s *Service) findMessage(ctx context.Context, appID, user, messageID string) (*models.Message, error) {
	notFound := apperr.NotFound("Message Not Exists.")
	eu, err := s.users.Find(ctx, appID, user)
	if err != nil {
		if apperr.Is(err, apperr.CodeNotFound) {
			return nil, notFound
		}
		return nil, err
	}
	var msg models.Message
	err = s.db.WithContext(ctx).Where("id = ? AND app_id = ? AND end_user_id = ?", messageID, appID, eu.ID).Take(&msg).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	return &msg, nil
}

// turnsUpTo returns the last few exchanges of msg's conversation, ending
// with msg itself.
func (s *Service) turnsUpTo(ctx context.Context, msg *models.Message) ([]Turn, error) {
	if msg.ConversationID == nil {
		return []Turn{{Query: msg.Query, Answer: msg.Answer}}, nil
	}
	var rows []models.Message
	err := s.db.WithContext(ctx).Select("query, answer").
		Where("conversation_id = ? AND created_at <= ? AND answer <> ''", *msg.ConversationID, msg.CreatedAt).
		Order("created_at DESC, id DESC").Limit(suggestionTurns).Find(&rows).Error
	if err != nil {
		return nil, err
	}
	turns := make([]Turn, 0, len(rows))
	for i := len(rows) - 1; i >= 0; i-- {
		turns = append(turns, Turn{Query: rows[i].Query, Answer: rows[i].Answer})
	}
	return turns, nil
}

// parseSuggestions reads the JSON array of questions out of a model reply.
func parseSuggestions(text string) []string {
	out := []string{}
	start, end := strings.Index(text, "["), strings.LastIndex(text, "]")
	if start < 0 || end <= start {
		return out
	}
	var raw []any
	if json.Unmarshal([]byte(text[start:end+1]), &raw) != nil {
		return out
	}
	for _, q := range raw {
		s, ok := q.(string)
		if s = strings.TrimSpace(s); !ok || s == "" {
			continue
		}
		out = append(out, truncateRunes(s, maxSuggestionRunes))
		if len(out) == maxSuggestions {
			break
		}
	}
	return out
}

// builtinSuggestions makes three follow-up questions from a query by fixed
// patterns.
func builtinSuggestions(query string) []string {
	topic := strings.TrimRight(FirstWords(query), "?!.。？！ ")
	if strings.TrimSpace(query) == "" {
		topic = "this"
	}
	return []string{
		"Can you tell me more about " + topic + "?",
		"Can you give an example of " + topic + "?",
		"What should I read next about " + topic + "?",
	}
}
