package conversations

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"appkb/internal/platform/apperr"
	"appkb/models"
)

// The JSON columns of models.Message (message_files, retriever_resources,
// agent_thoughts) each hold an array of the objects below. Their JSON names
// are the API's, so that what the chat runtime stores is what history shows.

// MessageFile is one file attached to a message, by the end user or by the app.
type MessageFile struct {
	ID       string  `json:"id"`
	Filename string  `json:"filename"`
	Type     string  `json:"type"`
	URL      *string `json:"url"`
	MimeType *string `json:"mime_type"`
	Size     *int64  `json:"size"`
	// TransferMethod is remote_url, local_file or tool_file.
	TransferMethod string `json:"transfer_method"`
	// BelongsTo is user or assistant.
	BelongsTo    *string `json:"belongs_to"`
	UploadFileID *string `json:"upload_file_id"`
}

// RetrieverResource is one knowledge chunk cited by an answer.
type RetrieverResource = models.RetrieverResource

// AgentThought is one reasoning or tool step of an agent's answer.
type AgentThought = models.AgentThought

// HistoryItem is a stored message with its JSON columns decoded and the
// owner's rating attached.
type HistoryItem struct {
	Message            models.Message
	Inputs             map[string]any
	Files              []MessageFile
	RetrieverResources []RetrieverResource
	AgentThoughts      []AgentThought
	// Rating is the end user's like or dislike; empty when none was given.
	Rating string
}

// HistoryQuery selects one page of a conversation's messages.
type HistoryQuery struct {
	// FirstID is the id of the oldest message the client already has; the
	// page holds the messages just before it. Empty for the latest ones.
	FirstID string
	// Limit is the page size, 1 to MaxLimit; 0 means DefaultLimit.
	Limit int
}

// History returns a page of the messages in one of user's conversations:
// the newest Limit messages older than FirstID (or the newest overall), put
// oldest first within the page as Dify does, so that a client can prepend
// the page to what it shows. HasMore tells whether older messages remain.
// An unknown conversation, or a FirstID that is not a message of it, is
// not_found.
func (s *Store) History(ctx context.Context, app *models.App, user, conversationID string, q HistoryQuery) (*Page[HistoryItem], error) {
	conv, err := s.Get(ctx, app, user, conversationID)
	if err != nil {
		return nil, err
	}
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	db := s.db.WithContext(ctx)
	query := db.Where("conversation_id = ?", conv.ID)
	if q.FirstID != "" {
		var n int64
		if err := db.Model(&models.Message{}).Where("conversation_id = ? AND id = ?", conv.ID, q.FirstID).Count(&n).Error; err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, apperr.NotFound("The message given as first_id does not exist in this conversation.")
		}
		query = query.Where("(created_at, id) < (SELECT created_at, id FROM messages WHERE id = ?)", q.FirstID)
	}
	var rows []models.Message
	if err := query.Order("created_at DESC, id DESC").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, err
	}
	page := cut(rows, limit)
	msgs := page.Data
	slices.Reverse(msgs)

	ratings, err := s.ratings(ctx, conv.EndUserID, msgs)
	if err != nil {
		return nil, err
	}
	out := &Page[HistoryItem]{Limit: page.Limit, HasMore: page.HasMore, Data: make([]HistoryItem, 0, len(msgs))}
	for _, m := range msgs {
		item, err := decodeMessage(m)
		if err != nil {
			return nil, err
		}
		item.Rating = ratings[m.ID]
		out.Data = append(out.Data, item)
	}
	return out, nil
}

// ratings returns the ratings endUserID gave to msgs, by message id.
func (s *Store) ratings(ctx context.Context, endUserID string, msgs []models.Message) (map[string]string, error) {
	out := map[string]string{}
	if len(msgs) == 0 {
		return out, nil
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	var fbs []models.MessageFeedback
	err := s.db.WithContext(ctx).Where("message_id IN ? AND end_user_id = ?", ids, endUserID).Find(&fbs).Error
	if err != nil {
		return nil, err
	}
	for _, f := range fbs {
		out[f.MessageID] = f.Rating
	}
	return out, nil
}

// decodeMessage reads the JSON columns of a stored message. Empty columns
// read as empty; a column that is not valid JSON is an internal error,
// since only the runtime writes them.
func decodeMessage(m models.Message) (HistoryItem, error) {
	item := HistoryItem{Message: m}
	cols := []struct {
		name string
		text string
		into any
	}{
		{"inputs", m.Inputs, &item.Inputs},
		{"message_files", m.MessageFiles, &item.Files},
		{"retriever_resources", m.RetrieverResources, &item.RetrieverResources},
		{"agent_thoughts", m.AgentThoughts, &item.AgentThoughts},
	}
	for _, c := range cols {
		if c.text == "" {
			continue
		}
		if err := json.Unmarshal([]byte(c.text), c.into); err != nil {
			return item, apperr.Internal(fmt.Errorf("message %s: column %s: %w", m.ID, c.name, err))
		}
	}
	if item.Inputs == nil {
		item.Inputs = map[string]any{}
	}
	if item.Files == nil {
		item.Files = []MessageFile{}
	}
	if item.RetrieverResources == nil {
		item.RetrieverResources = []RetrieverResource{}
	}
	if item.AgentThoughts == nil {
		item.AgentThoughts = []AgentThought{}
	}
	return item, nil
}
