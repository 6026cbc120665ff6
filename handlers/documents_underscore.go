package handlers

import (
	"context"

	"appkb/gen"
	"appkb/handlers/wire"
)

// Dify serves the four document operations below under a second spelling,
// with underscores instead of hyphens, which the official Python SDK still
// calls. Each alias runs the same handler as its hyphenated twin.

// CreateDocumentFromTextUnderscore serves POST /datasets/{dataset_id}/document/create_by_text.
func (s *Server) CreateDocumentFromTextUnderscore(ctx context.Context, req gen.CreateDocumentFromTextUnderscoreRequestObject) (gen.CreateDocumentFromTextUnderscoreResponseObject, error) {
	out, err := s.CreateDocumentFromText(ctx, gen.CreateDocumentFromTextRequestObject{DatasetId: req.DatasetId, Body: req.Body})
	if err != nil {
		return nil, err
	}
	return gen.CreateDocumentFromTextUnderscore200JSONResponse(out.(gen.CreateDocumentFromText200JSONResponse)), nil
}

// CreateDocumentFromFileUnderscore serves POST /datasets/{dataset_id}/document/create_by_file.
func (s *Server) CreateDocumentFromFileUnderscore(ctx context.Context, req gen.CreateDocumentFromFileUnderscoreRequestObject) (gen.CreateDocumentFromFileUnderscoreResponseObject, error) {
	out, err := s.CreateDocumentFromFile(ctx, gen.CreateDocumentFromFileRequestObject{DatasetId: req.DatasetId, Body: req.Body})
	if err != nil {
		return nil, err
	}
	return gen.CreateDocumentFromFileUnderscore200JSONResponse(out.(gen.CreateDocumentFromFile200JSONResponse)), nil
}

// UpdateDocumentByTextUnderscore serves POST /datasets/{dataset_id}/documents/{document_id}/update_by_text.
func (s *Server) UpdateDocumentByTextUnderscore(ctx context.Context, req gen.UpdateDocumentByTextUnderscoreRequestObject) (gen.UpdateDocumentByTextUnderscoreResponseObject, error) {
	out, err := s.UpdateDocumentByText(ctx, gen.UpdateDocumentByTextRequestObject{DatasetId: req.DatasetId, DocumentId: req.DocumentId, Body: req.Body})
	if err != nil {
		return nil, err
	}
	return gen.UpdateDocumentByTextUnderscore200JSONResponse(out.(gen.UpdateDocumentByText200JSONResponse)), nil
}

// UpdateDocumentByFileUnderscore serves POST /datasets/{dataset_id}/documents/{document_id}/update_by_file.
func (s *Server) UpdateDocumentByFileUnderscore(ctx context.Context, req gen.UpdateDocumentByFileUnderscoreRequestObject) (gen.UpdateDocumentByFileUnderscoreResponseObject, error) {
	out, err := s.updateByForm(ctx, req.DatasetId, req.DocumentId, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.UpdateDocumentByFileUnderscore200JSONResponse(wire.Created(out)), nil
}
