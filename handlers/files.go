package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// UploadChatFile serves POST /files/upload.
func (s *Server) UploadChatFile(ctx context.Context, req gen.UploadChatFileRequestObject) (gen.UploadChatFileResponseObject, error) {
	return nil, apperr.NotImplemented("POST /files/upload")
}

// PreviewChatFile serves GET /files/{file_id}/preview.
func (s *Server) PreviewChatFile(ctx context.Context, req gen.PreviewChatFileRequestObject) (gen.PreviewChatFileResponseObject, error) {
	return nil, apperr.NotImplemented("GET /files/{file_id}/preview")
}
