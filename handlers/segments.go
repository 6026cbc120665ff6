package handlers

import (
	"context"

	"appkb/gen"
	"appkb/handlers/wire"
	"appkb/internal/knowledge/documents"
)

// CreateSegments serves POST /datasets/{dataset_id}/documents/{document_id}/segments.
func (s *Server) CreateSegments(ctx context.Context, req gen.CreateSegmentsRequestObject) (gen.CreateSegmentsResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	in := make([]documents.NewSegment, 0, len(b.Segments))
	for _, n := range b.Segments {
		seg := documents.NewSegment{Content: n.Content, Answer: n.Answer}
		if n.Keywords != nil {
			seg.Keywords = append([]string{}, *n.Keywords...)
		}
		in = append(in, seg)
	}
	out, err := s.docs.CreateSegments(ctx, actor, req.DatasetId, req.DocumentId, in)
	if err != nil {
		return nil, err
	}
	return gen.CreateSegments200JSONResponse{Data: wire.Segments(out.Data), DocForm: out.DocForm}, nil
}

// ListSegments serves GET /datasets/{dataset_id}/documents/{document_id}/segments.
func (s *Server) ListSegments(ctx context.Context, req gen.ListSegmentsRequestObject) (gen.ListSegmentsResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	p := req.Params
	q := documents.SegmentQuery{Page: wire.ValueOf(p.Page), Limit: wire.ValueOf(p.Limit), Keyword: wire.ValueOf(p.Keyword), Status: wire.ValueOf(p.Status)}
	out, err := s.docs.ListSegments(ctx, actor, req.DatasetId, req.DocumentId, q)
	if err != nil {
		return nil, err
	}
	return gen.ListSegments200JSONResponse(wire.SegmentList(out)), nil
}

// GetSegmentDetail serves GET /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}.
func (s *Server) GetSegmentDetail(ctx context.Context, req gen.GetSegmentDetailRequestObject) (gen.GetSegmentDetailResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	out, err := s.docs.GetSegment(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId)
	if err != nil {
		return nil, err
	}
	return gen.GetSegmentDetail200JSONResponse(wire.SegmentDetail(out)), nil
}

// UpdateSegment serves POST /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}.
func (s *Server) UpdateSegment(ctx context.Context, req gen.UpdateSegmentRequestObject) (gen.UpdateSegmentResponseObject, error) {
	actor, body, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	b := body.Segment
	u := documents.SegmentUpdate{Content: b.Content, Answer: b.Answer, Keywords: b.Keywords, Enabled: b.Enabled}
	if b.RegenerateChildChunks != nil {
		u.RegenerateChildChunks = *b.RegenerateChildChunks
	}
	out, err := s.docs.UpdateSegment(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId, u)
	if err != nil {
		return nil, err
	}
	return gen.UpdateSegment200JSONResponse(wire.SegmentDetail(out)), nil
}

// DeleteSegment serves DELETE /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}.
func (s *Server) DeleteSegment(ctx context.Context, req gen.DeleteSegmentRequestObject) (gen.DeleteSegmentResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.docs.DeleteSegment(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId); err != nil {
		return nil, err
	}
	return gen.DeleteSegment204Response{}, nil
}

// CreateChildChunk serves POST /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks.
func (s *Server) CreateChildChunk(ctx context.Context, req gen.CreateChildChunkRequestObject) (gen.CreateChildChunkResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	c, err := s.docs.CreateChildChunk(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId, b.Content)
	if err != nil {
		return nil, err
	}
	return gen.CreateChildChunk200JSONResponse{Data: wire.Child(*c)}, nil
}

// GetChildChunks serves GET /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks.
func (s *Server) GetChildChunks(ctx context.Context, req gen.GetChildChunksRequestObject) (gen.GetChildChunksResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	out, err := s.docs.ListChildChunks(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId, wire.ValueOf(q.Page), wire.ValueOf(q.Limit), wire.ValueOf(q.Keyword))
	if err != nil {
		return nil, err
	}
	return gen.GetChildChunks200JSONResponse(wire.ChildPage(out)), nil
}

// UpdateChildChunk serves PATCH /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks/{child_chunk_id}.
func (s *Server) UpdateChildChunk(ctx context.Context, req gen.UpdateChildChunkRequestObject) (gen.UpdateChildChunkResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	c, err := s.docs.UpdateChildChunk(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId, req.ChildChunkId, b.Content)
	if err != nil {
		return nil, err
	}
	return gen.UpdateChildChunk200JSONResponse{Data: wire.Child(*c)}, nil
}

// DeleteChildChunk serves DELETE /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks/{child_chunk_id}.
func (s *Server) DeleteChildChunk(ctx context.Context, req gen.DeleteChildChunkRequestObject) (gen.DeleteChildChunkResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.docs.DeleteChildChunk(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId, req.ChildChunkId); err != nil {
		return nil, err
	}
	return gen.DeleteChildChunk204Response{}, nil
}
