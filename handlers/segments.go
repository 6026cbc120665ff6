package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// CreateSegments serves POST /datasets/{dataset_id}/documents/{document_id}/segments.
func (s *Server) CreateSegments(ctx context.Context, req gen.CreateSegmentsRequestObject) (gen.CreateSegmentsResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/documents/{document_id}/segments")
}

// ListSegments serves GET /datasets/{dataset_id}/documents/{document_id}/segments.
func (s *Server) ListSegments(ctx context.Context, req gen.ListSegmentsRequestObject) (gen.ListSegmentsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/documents/{document_id}/segments")
}

// GetSegmentDetail serves GET /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}.
func (s *Server) GetSegmentDetail(ctx context.Context, req gen.GetSegmentDetailRequestObject) (gen.GetSegmentDetailResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}")
}

// UpdateSegment serves POST /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}.
func (s *Server) UpdateSegment(ctx context.Context, req gen.UpdateSegmentRequestObject) (gen.UpdateSegmentResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}")
}

// DeleteSegment serves DELETE /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}.
func (s *Server) DeleteSegment(ctx context.Context, req gen.DeleteSegmentRequestObject) (gen.DeleteSegmentResponseObject, error) {
	return nil, apperr.NotImplemented("DELETE /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}")
}

// CreateChildChunk serves POST /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks.
func (s *Server) CreateChildChunk(ctx context.Context, req gen.CreateChildChunkRequestObject) (gen.CreateChildChunkResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks")
}

// GetChildChunks serves GET /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks.
func (s *Server) GetChildChunks(ctx context.Context, req gen.GetChildChunksRequestObject) (gen.GetChildChunksResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks")
}

// UpdateChildChunk serves PATCH /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks/{child_chunk_id}.
func (s *Server) UpdateChildChunk(ctx context.Context, req gen.UpdateChildChunkRequestObject) (gen.UpdateChildChunkResponseObject, error) {
	return nil, apperr.NotImplemented("PATCH /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks/{child_chunk_id}")
}

// DeleteChildChunk serves DELETE /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks/{child_chunk_id}.
func (s *Server) DeleteChildChunk(ctx context.Context, req gen.DeleteChildChunkRequestObject) (gen.DeleteChildChunkResponseObject, error) {
	return nil, apperr.NotImplemented("DELETE /datasets/{dataset_id}/documents/{document_id}/segments/{segment_id}/child_chunks/{child_chunk_id}")
}
