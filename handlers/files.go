package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/gen"
	"appkb/handlers/validation"
	"appkb/internal/apps"
	"appkb/internal/conversation/files"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// maxFormFieldSize bounds the plain (non-file) fields of a multipart form.
const maxFormFieldSize = 4 << 10

// UploadChatFile serves POST /files/upload: one file stored for the end
// user named by `user`. Only blocked extensions and the size limit of the
// file's kind are checked here; the app's file settings apply when the file
// is attached to a message or run.
func (s *Server) UploadChatFile(ctx context.Context, req gen.UploadChatFileRequestObject) (gen.UploadChatFileResponseObject, error) {
	app, _, err := s.currentDefinition(ctx)
	if err != nil {
		return nil, err
	}
	form, err := readUploadForm(req.Body, s.uploads, files.Rules{Limits: apps.DefaultSystemParameters})
	if err != nil {
		return nil, err
	}
	defer form.staged.Discard()
	eu, err := s.users.Resolve(ctx, app.ID, form.userOrDefault())
	if err != nil {
		return nil, err
	}
	row, err := form.staged.Commit(ctx, app.ID, eu.ID)
	if err != nil {
		return nil, err
	}
	return gen.UploadChatFile201JSONResponse(uploadResponse(row)), nil
}

// uploadForm is a read multipart upload: the staged file and the user.
type uploadForm struct {
	staged *files.Staged
	user   string
}

func (f *uploadForm) userOrDefault() string {
	if u := strings.TrimSpace(f.user); u != "" {
		return u
	}
	return files.DefaultUser
}

// readUploadForm reads every part of an upload form and stages its one
// file. The checks come in Dify's order: no file, more than one file, a
// file without a name, then the file's own type and size. The whole form
// is read even when the first file fails, so that a second file is
// reported as such.
func readUploadForm(body *multipart.Reader, store *files.Store, rules files.Rules) (*uploadForm, error) {
	if body == nil {
		return nil, apperr.New(http.StatusBadRequest, apperr.CodeNoFileUploaded, "No file was uploaded.")
	}
	form := &uploadForm{}
	var (
		fileParts int
		stageErr  error
	)
	for {
		part, err := body.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			form.staged.Discard()
			return nil, multipartError(err)
		}
		name, hasName := partFileName(part)
		switch {
		case hasName || part.FormName() == "file":
			fileParts++
			if fileParts > 1 || stageErr != nil {
				break
			}
			if !hasName || strings.TrimSpace(name) == "" {
				stageErr = apperr.New(http.StatusBadRequest, apperr.CodeFilenameNotExists, "The uploaded file has no file name.")
				break
			}
			form.staged, stageErr = store.Stage(rules, name, part.Header.Get("Content-Type"), part)
		case part.FormName() == "user":
			b, err := io.ReadAll(io.LimitReader(part, maxFormFieldSize+1))
			if err != nil {
				form.staged.Discard()
				return nil, multipartError(err)
			}
			if len(b) > maxFormFieldSize {
				form.staged.Discard()
				return nil, apperr.InvalidParam("user is too long")
			}
			if bytes.IndexByte(b, 0) >= 0 {
				form.staged.Discard()
				return nil, validation.NULError(`form field "user"`)
			}
			form.user = string(b)
		}
		part.Close()
	}
	switch {
	case fileParts == 0:
		stageErr = apperr.New(http.StatusBadRequest, apperr.CodeNoFileUploaded, "No file was uploaded.")
	case fileParts > 1:
		stageErr = apperr.New(http.StatusBadRequest, apperr.CodeTooManyFiles, "Only one file may be uploaded at a time.")
	}
	if stageErr != nil {
		form.staged.Discard()
		return nil, stageErr
	}
	return form, nil
}

// partFileName returns the filename parameter of a part exactly as sent
// (multipart.Part.FileName would cut it down to its last path segment),
// and whether the parameter is there at all.
func partFileName(p *multipart.Part) (string, bool) {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return "", false
	}
	name, ok := params["filename"]
	return name, ok
}

func multipartError(err error) *apperr.Error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return apperr.New(http.StatusRequestEntityTooLarge, apperr.CodeTooLarge, "The request body is too large.")
	}
	return apperr.Wrap(err, http.StatusBadRequest, apperr.CodeInvalidParam, "The multipart body cannot be read.")
}

// uploadResponse describes a stored file the way the upload operation
// answers.
func uploadResponse(f *models.UploadFile) gen.FileUploadResponse {
	link := filePreviewPath(f.ID)
	workspace := models.WorkspaceID
	out := gen.FileUploadResponse{
		Id:         f.ID,
		Name:       f.Name,
		Size:       int(f.Size),
		CreatedBy:  f.EndUserID,
		CreatedAt:  f.CreatedAt.Unix(),
		PreviewUrl: &link,
		SourceUrl:  &link,
		TenantId:   &workspace,
	}
	if f.Extension != "" {
		out.Extension = &f.Extension
	}
	if f.MimeType != "" {
		out.MimeType = &f.MimeType
	}
	return out
}

// filePreviewPath is where a file's bytes can be fetched with the app key.
func filePreviewPath(id string) string {
	return basePath + "/files/" + url.PathEscape(id) + "/preview"
}

// PreviewChatFile serves GET /files/{file_id}/preview: the bytes of a file
// of this app, inline with its own type, or as a download.
func (s *Server) PreviewChatFile(ctx context.Context, req gen.PreviewChatFileRequestObject) (gen.PreviewChatFileResponseObject, error) {
	p, err := principalFrom(ctx)
	if err != nil {
		return nil, err
	}
	user := ""
	if req.Params.User != nil {
		user = *req.Params.User
	}
	meta, content, err := s.uploads.OpenForApp(ctx, p.AppID, user, req.FileId)
	if err != nil {
		return nil, err
	}
	return filePreview{
		file:       meta,
		body:       content,
		attachment: req.Params.AsAttachment != nil && *req.Params.AsAttachment,
	}, nil
}

// filePreview writes a file's bytes. The generated response type always
// says application/octet-stream and has no way to add headers, so this one
// implements the response interface itself.
type filePreview struct {
	file       *models.UploadFile
	body       *files.Content
	attachment bool
}

func (r filePreview) VisitPreviewChatFileResponse(w http.ResponseWriter) error {
	defer r.body.Close()
	h := w.Header()
	disposition := "inline"
	contentType := r.file.MimeType
	if r.attachment {
		disposition = "attachment"
		contentType = "application/octet-stream"
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	h.Set("Content-Type", contentType)
	if v := mime.FormatMediaType(disposition, map[string]string{"filename": r.file.Name}); v != "" {
		h.Set("Content-Disposition", v)
	} else {
		h.Set("Content-Disposition", disposition)
	}
	h.Set("Content-Length", fmt.Sprint(r.body.Size))
	// The bytes came from a client: never let a browser run them as a page
	// of this origin or guess another type for them.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=3600")
	w.WriteHeader(http.StatusOK)
	_, err := io.Copy(w, r.body)
	return err
}

// serveSignedFilePreview answers a signed preview link of an uploaded file
// (the url of a message's local file) with the file's bytes, inline.
func (s *Server) serveSignedFilePreview(c echo.Context) error {
	id := c.Param("file_id")
	if !s.previews.Valid(id, c.QueryParam("timestamp"), c.QueryParam("nonce"), c.QueryParam("sign"), time.Now()) {
		return apperr.Forbidden("The file link is invalid or has expired.")
	}
	ctx := c.Request().Context()
	f, err := s.uploads.Get(ctx, id)
	if err != nil {
		return err
	}
	content, err := s.uploads.Open(ctx, f)
	if err != nil {
		return err
	}
	return filePreview{file: f, body: content}.VisitPreviewChatFileResponse(c.Response())
}
