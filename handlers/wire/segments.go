package wire

import (
	"appkb/gen"
	"appkb/internal/knowledge/documents"
	"appkb/internal/knowledge/retrieval"
)

// Chunks, child chunks and search hits, domain → wire. Each field is
// copied as the answer has always shown it: times in Unix seconds, text
// fields the domain keeps as strings sent as strings (never null), lists
// the domain leaves nil sent as null.

// unixF is a Unix time as the wire's number.
func unixF(p *int64) *float64 {
	if p == nil {
		return nil
	}
	v := float64(*p)
	return &v
}

// listOrNil points at a copy of list, or is nil for a nil list.
func listOrNil[T any](list []T) *[]T {
	if list == nil {
		return nil
	}
	return &list
}

func Child(c documents.ChildChunk) gen.ChildChunk {
	return gen.ChildChunk{Id: c.ID, SegmentId: c.SegmentID, Content: c.Content, Position: c.Position,
		WordCount: c.WordCount, Type: c.Type, CreatedAt: float64(c.CreatedAt), UpdatedAt: float64(c.UpdatedAt)}
}

func childrenOf(list []documents.ChildChunk) []gen.ChildChunk {
	return eachOf(list, func(c *documents.ChildChunk) gen.ChildChunk { return Child(*c) })
}

// attachmentsOf is the files of a chunk; the domain lists none yet
// (always an empty list), so only the list itself is carried over.
func attachmentsOf(list []any) *[]gen.SegmentAttachment {
	if list == nil {
		return nil
	}
	out := make([]gen.SegmentAttachment, 0, len(list))
	return &out
}

func segmentOf(s documents.Segment) gen.Segment {
	var children *[]gen.ChildChunk
	if s.ChildChunks != nil {
		list := childrenOf(s.ChildChunks)
		children = &list
	}
	return gen.Segment{
		Id: s.ID, Position: s.Position, DocumentId: s.DocumentID, Content: s.Content, SignContent: s.SignContent,
		Answer: &s.Answer, WordCount: s.WordCount, Tokens: s.Tokens, Keywords: listOrNil(s.Keywords),
		IndexNodeId: &s.IndexNodeID, IndexNodeHash: &s.IndexNodeHash, HitCount: s.HitCount, Enabled: s.Enabled,
		DisabledAt: unixF(s.DisabledAt), DisabledBy: s.DisabledBy, Status: s.Status, CreatedBy: s.CreatedBy,
		CreatedAt: float64(s.CreatedAt), UpdatedAt: float64(s.UpdatedAt), UpdatedBy: ValueOf(s.UpdatedBy),
		IndexingAt: unixF(s.IndexingAt), CompletedAt: unixF(s.CompletedAt), Error: s.Error, StoppedAt: unixF(s.StoppedAt),
		ChildChunks: children, Attachments: attachmentsOf(s.Attachments), Summary: s.Summary,
	}
}

func Segments(list []documents.Segment) []gen.Segment {
	return eachOf(list, func(s *documents.Segment) gen.Segment { return segmentOf(*s) })
}

func SegmentList(l *documents.SegmentList) gen.SegmentList {
	return gen.SegmentList{Data: Segments(l.Data), DocForm: l.DocForm, Total: l.Total, HasMore: l.HasMore,
		Limit: l.Limit, Page: l.Page}
}

func SegmentDetail(d *documents.SegmentDetail) gen.SegmentDetail {
	return gen.SegmentDetail{Data: segmentOf(d.Data), DocForm: d.DocForm}
}

func ChildPage(p *documents.ChildChunkPage) gen.ChildChunkList {
	return gen.ChildChunkList{Data: childrenOf(p.Data), Total: p.Total, TotalPages: p.TotalPages, Page: p.Page, Limit: p.Limit}
}

// Hit is one search hit as the retrieve operation answers it: the
// chunk with a summary of its document, and the matching child chunks
// (an empty list, never null, when there are none).
func Hit(h retrieval.Hit) gen.RetrieveRecord {
	s := documents.SegmentView(&h.Segment)
	score := h.Score
	files := []gen.SegmentAttachment{}
	var meta *map[string]any
	if h.Document.Metadata != nil {
		m := map[string]any(h.Document.Metadata)
		meta = &m
	}
	rec := gen.RetrieveRecord{Score: &score, Files: &files, ChildChunks: make([]gen.RetrievedChildChunk, len(h.ChildChunks)),
		Segment: gen.RetrievedSegment{
			Id: s.ID, Position: s.Position, DocumentId: s.DocumentID, Content: s.Content, SignContent: s.SignContent,
			Answer: &s.Answer, WordCount: s.WordCount, Tokens: s.Tokens, Keywords: listOrNil(s.Keywords),
			IndexNodeId: &s.IndexNodeID, IndexNodeHash: &s.IndexNodeHash, HitCount: s.HitCount, Enabled: s.Enabled,
			DisabledAt: unixF(s.DisabledAt), DisabledBy: s.DisabledBy, Status: s.Status, CreatedBy: s.CreatedBy,
			CreatedAt: float64(s.CreatedAt), IndexingAt: unixF(s.IndexingAt), CompletedAt: unixF(s.CompletedAt),
			Error: s.Error, StoppedAt: unixF(s.StoppedAt),
			Document: gen.SegmentDocumentSummary{Id: h.Document.ID, DataSourceType: h.Document.DataSourceType,
				Name: h.Document.Name, DocMetadata: meta},
		}}
	for i, c := range h.ChildChunks {
		score := c.Score
		rec.ChildChunks[i] = gen.RetrievedChildChunk{Id: c.ID, Content: c.Content, Position: c.Position, Score: &score}
	}
	return rec
}
