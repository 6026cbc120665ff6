package handlers

import (
	"appkb/gen"
	"appkb/internal/conversation/conversations"
)

// The lists a message of a conversation's history carries, domain → wire.
// Text the domain keeps as plain strings is always sent (empty included);
// lists and maps the domain leaves nil are left out.

func wireMessageFiles(list []conversations.MessageFile) []gen.MessageFileItem {
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

func wireRetrieverResources(list []conversations.RetrieverResource) []gen.RetrieverResource {
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

func wireAgentThoughts(list []conversations.AgentThought) []gen.AgentThoughtItem {
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
