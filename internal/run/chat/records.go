package chat

// The rows a generation writes: the message as it starts and as it ends,
// and the conversation it belongs to.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"appkb/internal/platform/apperr"
	"appkb/models"
)

// startRecord is the message as stored when a stream begins.
func (g *Generation) startRecord() *models.Message {
	m := g.record("", StatusNormal, nil, Usage{}, nil)
	m.Generating = true // until save; see CloseInterrupted
	m.ReplicaID = g.svc.replica.OwnerID()
	return m
}

// finalRecord is the message as stored when the run is over.
func (g *Generation) finalRecord(out *outcome) *models.Message {
	status, errText := StatusNormal, (*string)(nil)
	if out.err != nil {
		status = StatusError
		msg := apperr.From(out.err).Message
		errText = &msg
	}
	var thoughts any
	switch {
	case out.thoughts != nil:
		thoughts = out.thoughts
	case isAgentMode(g.Mode):
		thoughts = []map[string]any{{
			"id": g.thoughtID(), "chain_id": nil, "message_id": g.MessageID, "position": 1,
			"thought": out.answer, "tool": "", "tool_labels": map[string]any{}, "tool_input": "",
			"observation": "", "files": []string{}, "created_at": g.CreatedAt.Unix(),
		}}
	}
	return g.record(out.answer, status, errText, out.usage, thoughts)
}

func (g *Generation) record(answer, status string, errText *string, u Usage, thoughts any) *models.Message {
	m := &models.Message{
		ID:                      g.MessageID,
		AppID:                   g.appID,
		EndUserID:               g.endUserID,
		ParentMessageID:         g.parentID,
		TaskID:                  g.TaskID,
		Query:                   g.query,
		Inputs:                  mustJSON(g.inputs, "{}"),
		Answer:                  answer,
		MessageTokens:           u.PromptTokens,
		AnswerTokens:            u.CompletionTokens,
		TotalTokens:             u.TotalTokens,
		ProviderResponseLatency: u.Latency,
		Status:                  status,
		Error:                   errText,
		MessageFiles:            mustJSON(g.files, "[]"),
		RetrieverResources:      mustJSON(g.storedCitations(answer, status), "[]"),
		AgentThoughts:           mustJSON(thoughts, "[]"),
		CreatedAt:               g.CreatedAt,
		UpdatedAt:               time.Now().UTC(),
	}
	if g.ConversationID != "" {
		id := g.ConversationID
		m.ConversationID = &id
	}
	if u.known {
		price, currency := u.TotalPrice, u.Currency
		m.TotalPrice, m.Currency = &price, &currency
	}
	return m
}

// mustJSON encodes v, giving empty for nil slices and maps.
func mustJSON(v any, empty string) string {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return empty
	}
	return string(b)
}

// insert stores a new message, and its conversation when it starts one.
func (g *Generation) insert(ctx context.Context, m *models.Message, name string) error {
	return g.svc.commits.Write(ctx, func(tx *gorm.DB) error {
		if g.newConv {
			if err := models.InsertConversationWithMessage(tx, g.conversation(name, 0), m); err != nil {
				return fmt.Errorf("store conversation and message: %w", err)
			}
			return nil
		}
		if err := models.InsertMessage(tx, m); err != nil {
			return fmt.Errorf("store message: %w", err)
		}
		return nil
	})
}

// save stores the finished message: it updates the row a stream inserted,
// or inserts it (with a new conversation) for a blocking call. The
// conversation counts the exchange and, when new, gets its name.
func (g *Generation) save(ctx context.Context, m *models.Message, name string, inserted bool) error {
	now := time.Now().UTC()
	return g.svc.commits.Write(ctx, func(tx *gorm.DB) error {
		if !inserted {
			if g.newConv {
				if err := models.InsertConversationWithMessage(tx, g.conversation(name, 1), m); err != nil {
					return fmt.Errorf("store conversation and message: %w", err)
				}
				return nil
			}
			if err := models.InsertMessage(tx, m); err != nil {
				return fmt.Errorf("store message: %w", err)
			}
			if g.ConversationID == "" {
				return nil
			}
		} else {
			if err := models.FinishMessage(tx, m, now); err != nil {
				return fmt.Errorf("update message: %w", err)
			}
			if g.ConversationID == "" {
				return nil
			}
		}
		newName := ""
		if g.newConv {
			newName = name
		}
		return models.CountExchange(tx, g.ConversationID, newName, now)
	})
}

func (g *Generation) conversation(name string, dialogues int) *models.Conversation {
	return &models.Conversation{
		ID:            g.ConversationID,
		AppID:         g.appID,
		EndUserID:     g.endUserID,
		Mode:          g.Mode,
		Name:          name,
		Inputs:        mustJSON(g.inputs, "{}"),
		Introduction:  g.intro,
		Status:        StatusNormal,
		DialogueCount: dialogues,
		CreatedAt:     g.CreatedAt,
		UpdatedAt:     g.CreatedAt,
	}
}
