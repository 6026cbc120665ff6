package handlers

import (
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/gen"
	"appkb/handlers/forms"
	"appkb/handlers/wire"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/docparse"
)

// kbJSON answers 200 with a value encoded as is: human input forms, and the
// document detail, whose keys depend on its metadata parameter.
// Knowledge operations answer with the generated types instead, filled by
// the converters of handlers/wire: openapi.yaml lists every key they always
// send as required, so the generated types write each of them, null when
// unset, as Dify does.
type kbJSON struct{ v any }

func (r kbJSON) VisitGetDocumentDetailResponse(w http.ResponseWriter) error { return r.write(w) }

func (r kbJSON) write(w http.ResponseWriter) error {
	body, err := json.Marshal(r.v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(append(body, '\n'))
	return err
}

// settingsFrom converts the generated request fields shared by the text
// operations.
func settingsFrom(technique, docForm, language *string, rule *gen.ProcessRule, rm *gen.RetrievalModel, em, emp *string) (documents.Settings, error) {
	st := documents.Settings{IndexingTechnique: technique, DocForm: docForm, DocLanguage: language,
		EmbeddingModel: em, EmbeddingModelProvider: emp}
	if rule != nil {
		r := wire.DomainProcessRule(rule)
		st.ProcessRule = &r
	}
	if rm != nil {
		r, err := wire.DomainRetrievalModel(rm)
		if err != nil {
			return st, err
		}
		st.RetrievalModel = &r
	}
	return st, nil
}

// CreateDocumentFromText serves POST /datasets/{dataset_id}/document/create-by-text.
func (s *Server) CreateDocumentFromText(ctx context.Context, req gen.CreateDocumentFromTextRequestObject) (gen.CreateDocumentFromTextResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	st, err := settingsFrom((*string)(b.IndexingTechnique), (*string)(b.DocForm), b.DocLanguage, b.ProcessRule, b.RetrievalModel, b.EmbeddingModel, b.EmbeddingModelProvider)
	if err != nil {
		return nil, err
	}
	out, err := s.docs.CreateFromText(ctx, actor, req.DatasetId, b.Name, b.Text, st)
	if err != nil {
		return nil, err
	}
	return gen.CreateDocumentFromText200JSONResponse(wire.Created(out)), nil
}

// documentForm is a read multipart form of the file operations.
type documentForm struct {
	file     *documents.Upload
	settings documents.Settings
	spool    forms.Spool // where the file part was written; removed by close
}

// close removes the spooled file part.
func (f *documentForm) close() { f.spool.Close() }

// readDocumentForm reads the caller's actor and the `file` and `data`
// parts. The file goes to a temporary file under the upload spool as it
// arrives, and is cut off with 413 once it passes the parser's size limit;
// the caller must close the form.
func (s *Server) readDocumentForm(ctx context.Context, body *multipart.Reader, fileRequired bool) (datasets.Actor, *documentForm, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return actor, nil, err
	}
	form := &documentForm{spool: forms.Spool{Dir: s.uploadSpool(), Limit: docparse.DefaultLimits.MaxFileSize}}
	spec := forms.Spec{
		RequireName: true,
		File: func(f forms.File) error {
			if err := form.spool.Take(f.Body); err != nil {
				return err
			}
			form.file = &documents.Upload{Name: path.Base(strings.ReplaceAll(f.Name, `\`, "/")), MimeType: f.ContentType, Body: form.spool.File}
			return nil
		},
		Fields: map[string]forms.Field{"data": {Max: 1 << 20, Set: func(b []byte) (err error) {
			form.settings, err = documents.ParseFileSettings(string(b))
			return err
		}}},
	}
	if fileRequired {
		spec.NoFile = forms.NoFile()
	}
	if err := forms.Read(body, spec); err != nil {
		form.close()
		return actor, nil, err
	}
	return actor, form, nil
}

// uploadSpool is where file parts wait while a request is read.
func (s *Server) uploadSpool() string {
	if s.dataDir == "" {
		return os.TempDir()
	}
	return filepath.Join(s.dataDir, "tmp")
}

// CreateDocumentFromFile serves POST /datasets/{dataset_id}/document/create-by-file.
func (s *Server) CreateDocumentFromFile(ctx context.Context, req gen.CreateDocumentFromFileRequestObject) (gen.CreateDocumentFromFileResponseObject, error) {
	actor, form, err := s.readDocumentForm(ctx, req.Body, true)
	if err != nil {
		return nil, err
	}
	defer form.close()
	out, err := s.docs.CreateFromFile(ctx, actor, req.DatasetId, *form.file, form.settings)
	if err != nil {
		return nil, err
	}
	return gen.CreateDocumentFromFile200JSONResponse(wire.Created(out)), nil
}

// ListDocuments serves GET /datasets/{dataset_id}/documents.
func (s *Server) ListDocuments(ctx context.Context, req gen.ListDocumentsRequestObject) (gen.ListDocumentsResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	q := req.Params
	// As on every other paged list: pages count from 1.
	if q.Page != nil && *q.Page < 1 {
		return nil, apperr.InvalidParam(`query parameter "page": number must be at least 1`)
	}
	p := documents.ListParams{Page: wire.ValueOf(q.Page), Limit: wire.ValueOf(q.Limit), Keyword: wire.ValueOf(q.Keyword),
		Status: string(wire.ValueOf(q.Status))}
	page, err := s.docs.ListDocuments(ctx, actor, req.DatasetId, p)
	if err != nil {
		return nil, err
	}
	return gen.ListDocuments200JSONResponse(wire.DocumentPage(page)), nil
}

// GetDocumentDetail serves GET /datasets/{dataset_id}/documents/{document_id}.
func (s *Server) GetDocumentDetail(ctx context.Context, req gen.GetDocumentDetailRequestObject) (gen.GetDocumentDetailResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	metadata := ""
	if req.Params.Metadata != nil {
		metadata = string(*req.Params.Metadata)
	}
	out, err := s.docs.GetDocument(ctx, actor, req.DatasetId, req.DocumentId, metadata)
	if err != nil {
		return nil, err
	}
	// Which keys this answer has depends on the metadata parameter (only
	// the metadata, or the whole document), so it is written as the
	// indexing package shaped it rather than through one generated type.
	return kbJSON{out}, nil
}

// DeleteDocument serves DELETE /datasets/{dataset_id}/documents/{document_id}.
func (s *Server) DeleteDocument(ctx context.Context, req gen.DeleteDocumentRequestObject) (gen.DeleteDocumentResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.docs.DeleteDocument(ctx, actor, req.DatasetId, req.DocumentId); err != nil {
		return nil, err
	}
	return gen.DeleteDocument204Response{}, nil
}

// updateByForm is the PATCH and the older update-by-file operation.
func (s *Server) updateByForm(ctx context.Context, datasetID, documentID string, body *multipart.Reader) (*documents.Created, error) {
	actor, form, err := s.readDocumentForm(ctx, body, false)
	if err != nil {
		return nil, err
	}
	defer form.close()
	return s.docs.UpdateDocument(ctx, actor, datasetID, documentID, documents.UpdateParams{File: form.file, Settings: form.settings})
}

// UpdateDocument serves PATCH /datasets/{dataset_id}/documents/{document_id}.
func (s *Server) UpdateDocument(ctx context.Context, req gen.UpdateDocumentRequestObject) (gen.UpdateDocumentResponseObject, error) {
	out, err := s.updateByForm(ctx, req.DatasetId, req.DocumentId, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.UpdateDocument200JSONResponse(wire.Created(out)), nil
}

// UpdateDocumentByFile serves POST /datasets/{dataset_id}/documents/{document_id}/update-by-file.
func (s *Server) UpdateDocumentByFile(ctx context.Context, req gen.UpdateDocumentByFileRequestObject) (gen.UpdateDocumentByFileResponseObject, error) {
	out, err := s.updateByForm(ctx, req.DatasetId, req.DocumentId, req.Body)
	if err != nil {
		return nil, err
	}
	return gen.UpdateDocumentByFile200JSONResponse(wire.Created(out)), nil
}

// UpdateDocumentByText serves POST /datasets/{dataset_id}/documents/{document_id}/update-by-text.
func (s *Server) UpdateDocumentByText(ctx context.Context, req gen.UpdateDocumentByTextRequestObject) (gen.UpdateDocumentByTextResponseObject, error) {
	actor, b, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	st, err := settingsFrom(nil, (*string)(b.DocForm), b.DocLanguage, b.ProcessRule, b.RetrievalModel, nil, nil)
	if err != nil {
		return nil, err
	}
	out, err := s.docs.UpdateDocument(ctx, actor, req.DatasetId, req.DocumentId, documents.UpdateParams{Name: b.Name, Text: b.Text, Settings: st})
	if err != nil {
		return nil, err
	}
	return gen.UpdateDocumentByText200JSONResponse(wire.Created(out)), nil
}

// GetDocumentIndexingStatus serves GET /datasets/{dataset_id}/documents/{batch}/indexing-status.
func (s *Server) GetDocumentIndexingStatus(ctx context.Context, req gen.GetDocumentIndexingStatusRequestObject) (gen.GetDocumentIndexingStatusResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	data, err := s.docs.BatchStatus(ctx, actor, req.DatasetId, req.Batch)
	if err != nil {
		return nil, err
	}
	return gen.GetDocumentIndexingStatus200JSONResponse(wire.IndexingStatuses(data)), nil
}

// BatchUpdateDocumentStatus serves PATCH /datasets/{dataset_id}/documents/status/{action}.
func (s *Server) BatchUpdateDocumentStatus(ctx context.Context, req gen.BatchUpdateDocumentStatusRequestObject) (gen.BatchUpdateDocumentStatusResponseObject, error) {
	actor, body, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	if err := s.docs.SetStatus(ctx, actor, req.DatasetId, string(req.Action), body.DocumentIds); err != nil {
		return nil, err
	}
	return gen.BatchUpdateDocumentStatus200JSONResponse{Result: "success"}, nil
}

// DownloadDocument serves GET /datasets/{dataset_id}/documents/{document_id}/download:
// a signed link to documentFilePath, valid for downloadLinkTTL.
func (s *Server) DownloadDocument(ctx context.Context, req gen.DownloadDocumentRequestObject) (gen.DownloadDocumentResponseObject, error) {
	actor, err := s.actorOf(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.docs.File(ctx, actor, req.DatasetId, req.DocumentId); err != nil {
		return nil, err
	}
	return gen.DownloadDocument200JSONResponse{Url: s.links.URL("/files/datasets/", req.DatasetId, req.DocumentId, time.Now().Add(downloadLinkTTL))}, nil
}

// DownloadDocumentsZip serves POST /datasets/{dataset_id}/documents/download-zip.
func (s *Server) DownloadDocumentsZip(ctx context.Context, req gen.DownloadDocumentsZipRequestObject) (gen.DownloadDocumentsZipResponseObject, error) {
	actor, body, err := actorWithBody(s, ctx, req.Body)
	if err != nil {
		return nil, err
	}
	files, err := s.docs.Files(ctx, actor, req.DatasetId, body.DocumentIds)
	if err != nil {
		return nil, err
	}
	archive, err := documents.OpenArchive(ctx, files, s.log)
	if err != nil {
		return nil, err
	}
	return gen.DownloadDocumentsZip200ApplicationzipResponse{Body: archive}, nil
}

// downloadLinkTTL is how long a document download link works.
const downloadLinkTTL = time.Hour

// documentFilePath serves the original files of documents behind signed
// links; it lies outside /v1 because the link itself is the credential.
const documentFilePath = "/files/datasets/:dataset_id/documents/:document_id"

// serveDocumentFile answers a signed download link with the file's bytes.
func (s *Server) serveDocumentFile(c echo.Context) error {
	ds, doc := c.Param("dataset_id"), c.Param("document_id")
	if !s.links.Valid(ds, doc, c.QueryParam("expires"), c.QueryParam("sign"), time.Now()) {
		return apperr.Forbidden("The download link is invalid or has expired.")
	}
	ctx := c.Request().Context()
	f, err := s.docs.File(ctx, datasets.Actor{}, ds, doc)
	if err != nil {
		return err
	}
	body, size, err := f.Open(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	return forms.Download(c.Response(), c.Request(), f.Name, f.MimeType, body, size)
}
