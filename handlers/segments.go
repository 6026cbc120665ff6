package handlers

import (
	"context"

	"appkb/gen"
	"appkb/internal/knowledge/documents"
	"appkb/internal/platform/apperr"
)

// CreateSegments serves POST /datasets/{dataset_id}/documents/{document_id}/segments.
func (s *Server) CreateSegments(ctx context.Context, req gen.CreateSegmentsRequestObject) (gen.CreateSegmentsResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, apperr.InvalidParam("request body is required")
	}
	in := make([]documents.NewSegment, 0, len(req.Body.Segments))
	for _, n := range req.Body.Segments {
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
	return gen.CreateSegments200JSONResponse{Data: wireSegments(out.Data), DocForm: out.DocForm}, nil
}

// ListSegments serves GET /datasets/{dataset_id}/documents/{document_id}/segments.
func (s *Server) ListSegments(ctx context.Context, req gen.ListSegmentsRequestObject) (gen.ListSegmentsResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	q := documents.SegmentQuery{}
	p := req.Params
	if p.Page != nil {
		q.Page = *p.Page
	}
	if p.Limit != nil {
		q.Limit = *p.Limit
	}
	if p.Keyword != nil {
		q.Keyword = *p.Keyword
	}
	if p.Status != nil {
		q.Status = *p.Status
	}
	out, err := s.docs.ListSegments(ctx, actor, req.DatasetId, req.DocumentId, q)
	if err != nil {
		return nil, err
	}
	return gen.ListSegments200JSONResponse(wireSegmentList(out)), nil
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
	return gen.GetSegmentDetail200JSONResponse(wireSegmentDetail(out)), nil
}

// UpdateSegment serves POST /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}.
func (s *Server) UpdateSegment(ctx context.Context, req gen.UpdateSegmentRequestObject) (gen.UpdateSegmentResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, apperr.InvalidParam("request body is required")
	}
	b := req.Body.Segment
	u := documents.SegmentUpdate{Content: b.Content, Answer: b.Answer, Keywords: b.Keywords, Enabled: b.Enabled}
	if b.RegenerateChildChunks != nil {
		u.RegenerateChildChunks = *b.RegenerateChildChunks
	}
	out, err := s.docs.UpdateSegment(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId, u)
	if err != nil {
		return nil, err
	}
	return gen.UpdateSegment200JSONResponse(wireSegmentDetail(out)), nil
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
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, apperr.InvalidParam("request body is required")
	}
	c, err := s.docs.CreateChildChunk(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId, req.Body.Content)
	if err != nil {
		return nil, err
	}
	return gen.CreateChildChunk200JSONResponse{Data: wireChild(*c)}, nil
}

// GetChildChunks serves GET /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks.
func (s *Server) GetChildChunks(ctx context.Context, req gen.GetChildChunksRequestObject) (gen.GetChildChunksResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	var page, limit int
	var keyword string
	if req.Params.Page != nil {
		page = *req.Params.Page
	}
	if req.Params.Limit != nil {
		limit = *req.Params.Limit
	}
	if req.Params.Keyword != nil {
		keyword = *req.Params.Keyword
	}
	out, err := s.docs.ListChildChunks(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId, page, limit, keyword)
	if err != nil {
		return nil, err
	}
	return gen.GetChildChunks200JSONResponse(wireChildPage(out)), nil
}

// UpdateChildChunk serves PATCH /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks/{child_chunk_id}.
func (s *Server) UpdateChildChunk(ctx context.Context, req gen.UpdateChildChunkRequestObject) (gen.UpdateChildChunkResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, apperr.InvalidParam("request body is required")
	}
	c, err := s.docs.UpdateChildChunk(ctx, actor, req.DatasetId, req.DocumentId, req.SegmentId, req.ChildChunkId, req.Body.Content)
	if err != nil {
		return nil, err
	}
	return gen.UpdateChildChunk200JSONResponse{Data: wireChild(*c)}, nil
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
