package wire

import (
	"appkb/gen"
	"appkb/internal/conversation/conversations"
	"appkb/models"
)

// Conversations, their variables and messages, domain → wire.

// ConversationItem maps a conversation to the wire.
func ConversationItem(c *models.Conversation) gen.ConversationListItem {
	inputs := conversations.DecodeObject(c.Inputs)
	return gen.ConversationListItem{
		Id:           c.ID,
		Name:         c.Name,
		Inputs:       &inputs,
		Status:       c.Status,
		Introduction: &c.Introduction,
		CreatedAt:    c.CreatedAt.Unix(),
		UpdatedAt:    c.UpdatedAt.Unix(),
	}
}

// VariableItem maps a conversation variable to the wire, its value as
// text.
func VariableItem(v *models.ConversationVariable) gen.ConversationVariableItem {
	created, updated := v.CreatedAt.Unix(), v.UpdatedAt.Unix()
	return gen.ConversationVariableItem{
		Id:          v.ID,
		Name:        v.Name,
		ValueType:   v.ValueType,
		Value:       conversations.ValueText(v.Value),
		Description: &v.Description,
		CreatedAt:   &created,
		UpdatedAt:   &updated,
	}
}

// HistoryItem maps one message of a conversation's history to the wire.
func HistoryItem(h *conversations.HistoryItem) gen.ConversationMessageItem {
	m := &h.Message
	item := gen.ConversationMessageItem{
		Id:                      m.ID,
		ConversationId:          ValueOf(m.ConversationID),
		ParentMessageId:         m.ParentMessageID,
		Inputs:                  &h.Inputs,
		Query:                   &m.Query,
		Answer:                  &m.Answer,
		Status:                  &m.Status,
		Error:                   m.Error,
		MessageTokens:           &m.MessageTokens,
		AnswerTokens:            &m.AnswerTokens,
		TotalTokens:             &m.TotalTokens,
		ProviderResponseLatency: &m.ProviderResponseLatency,
		TotalPrice:              m.TotalPrice,
		Currency:                m.Currency,
		CreatedAt:               m.CreatedAt.Unix(),
	}
	if h.Rating != "" {
		item.Feedback = &struct {
			Rating *string `json:"rating,omitempty"`
		}{Rating: &h.Rating}
	}
	files, resources, thoughts := messageFilesOf(h.Files), retrieverResourcesOf(h.RetrieverResources), agentThoughtsOf(h.AgentThoughts)
	item.MessageFiles, item.RetrieverResources, item.AgentThoughts = &files, &resources, &thoughts
	item.ExtraContents = emptyList(item.ExtraContents)
	return item
}

// emptyList gives an optional list field an empty, non-null value; the
// argument only carries the field's type.
func emptyList[T any](_ *[]T) *[]T {
	out := []T{}
	return &out
}

// The lists a message of a conversation's history carries, domain → wire.
// Text the domain keeps as plain strings is always sent (empty included);
// lists and maps the domain leaves nil are left out.

func messageFilesOf(list []conversations.MessageFile) []gen.MessageFileItem {
	if list == nil {
		return nil
	}
	out := make([]gen.MessageFileItem, len(list))
	for i := range list {
		f := &list[i]
		item := gen.MessageFileItem{Id: f.ID, Filename: &f.Filename, Type: &f.Type, Url: f.URL, MimeType: f.MimeType,
			TransferMethod: &f.TransferMethod, BelongsTo: f.BelongsTo, UploadFileId: f.UploadFileID}
		if f.Size != nil {
			size := int(*f.Size)
			item.Size = &size
		}
		out[i] = item
	}
	return out
}

func retrieverResourcesOf(list []conversations.RetrieverResource) []gen.RetrieverResource {
	if list == nil {
		return nil
	}
	out := make([]gen.RetrieverResource, len(list))
	for i := range list {
		r := &list[i]
		score := float32(r.Score)
		out[i] = gen.RetrieverResource{Id: &r.ID, MessageId: &r.MessageID, Position: &r.Position, DatasetId: &r.DatasetID,
			DatasetName: &r.DatasetName, DocumentId: &r.DocumentID, DocumentName: &r.DocumentName, DataSourceType: &r.DataSourceType,
			SegmentId: &r.SegmentID, Score: &score, HitCount: &r.HitCount, WordCount: &r.WordCount, SegmentPosition: &r.SegmentPosition,
			IndexNodeHash: &r.IndexNodeHash, Content: &r.Content, Summary: r.Summary, CreatedAt: &r.CreatedAt}
	}
	return out
}

func agentThoughtsOf(list []conversations.AgentThought) []gen.AgentThoughtItem {
	if list == nil {
		return nil
	}
	out := make([]gen.AgentThoughtItem, len(list))
	for i := range list {
		a := &list[i]
		item := gen.AgentThoughtItem{Id: a.ID, ChainId: a.ChainID, MessageId: a.MessageID, Position: a.Position,
			Thought: &a.Thought, Tool: &a.Tool, ToolInput: &a.ToolInput, Observation: &a.Observation,
			Files: listOrNil(a.Files), CreatedAt: &a.CreatedAt}
		if a.ToolLabels != nil {
			labels := map[string]any(a.ToolLabels)
			item.ToolLabels = &labels
		}
		out[i] = item
	}
	return out
}
