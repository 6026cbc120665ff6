package handlers

import (
	"context"

	"appkb/apperr"
	"appkb/gen"
)

// CreateDocumentFromText serves POST /datasets/{dataset_id}/document/create-by-text.
func (s *Server) CreateDocumentFromText(ctx context.Context, req gen.CreateDocumentFromTextRequestObject) (gen.CreateDocumentFromTextResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/document/create-by-text")
}

// CreateDocumentFromFile serves POST /datasets/{dataset_id}/document/create-by-file.
func (s *Server) CreateDocumentFromFile(ctx context.Context, req gen.CreateDocumentFromFileRequestObject) (gen.CreateDocumentFromFileResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/document/create-by-file")
}

// ListDocuments serves GET /datasets/{dataset_id}/documents.
func (s *Server) ListDocuments(ctx context.Context, req gen.ListDocumentsRequestObject) (gen.ListDocumentsResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/documents")
}

// GetDocumentDetail serves GET /datasets/{dataset_id}/documents/{document_id}.
func (s *Server) GetDocumentDetail(ctx context.Context, req gen.GetDocumentDetailRequestObject) (gen.GetDocumentDetailResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/documents/{document_id}")
}

// DeleteDocument serves DELETE /datasets/{dataset_id}/documents/{document_id}.
func (s *Server) DeleteDocument(ctx context.Context, req gen.DeleteDocumentRequestObject) (gen.DeleteDocumentResponseObject, error) {
	return nil, apperr.NotImplemented("DELETE /datasets/{dataset_id}/documents/{document_id}")
}

// UpdateDocument serves PATCH /datasets/{dataset_id}/documents/{document_id}.
func (s *Server) UpdateDocument(ctx context.Context, req gen.UpdateDocumentRequestObject) (gen.UpdateDocumentResponseObject, error) {
	return nil, apperr.NotImplemented("PATCH /datasets/{dataset_id}/documents/{document_id}")
}

// DownloadDocument serves GET /datasets/{dataset_id}/documents/{document_id}/download.
func (s *Server) DownloadDocument(ctx context.Context, req gen.DownloadDocumentRequestObject) (gen.DownloadDocumentResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/documents/{document_id}/download")
}

// GetDocumentIndexingStatus serves GET /datasets/{dataset_id}/documents/{batch}/indexing-status.
func (s *Server) GetDocumentIndexingStatus(ctx context.Context, req gen.GetDocumentIndexingStatusRequestObject) (gen.GetDocumentIndexingStatusResponseObject, error) {
	return nil, apperr.NotImplemented("GET /datasets/{dataset_id}/documents/{batch}/indexing-status")
}

// UpdateDocumentByText serves POST /datasets/{dataset_id}/documents/{document_id}/update-by-text.
func (s *Server) UpdateDocumentByText(ctx context.Context, req gen.UpdateDocumentByTextRequestObject) (gen.UpdateDocumentByTextResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/documents/{document_id}/update-by-text")
}

// UpdateDocumentByFile serves POST /datasets/{dataset_id}/documents/{document_id}/update-by-file.
func (s *Server) UpdateDocumentByFile(ctx context.Context, req gen.UpdateDocumentByFileRequestObject) (gen.UpdateDocumentByFileResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/documents/{document_id}/update-by-file")
}

// DownloadDocumentsZip serves POST /datasets/{dataset_id}/documents/download-zip.
func (s *Server) DownloadDocumentsZip(ctx context.Context, req gen.DownloadDocumentsZipRequestObject) (gen.DownloadDocumentsZipResponseObject, error) {
	return nil, apperr.NotImplemented("POST /datasets/{dataset_id}/documents/download-zip")
}

// BatchUpdateDocumentStatus serves PATCH /datasets/{dataset_id}/documents/status/{action}.
func (s *Server) BatchUpdateDocumentStatus(ctx context.Context, req gen.BatchUpdateDocumentStatusRequestObject) (gen.BatchUpdateDocumentStatusResponseObject, error) {
	return nil, apperr.NotImplemented("PATCH /datasets/{dataset_id}/documents/status/{action}")
}
