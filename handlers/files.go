package handlers

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/gen"
	"appkb/handlers/forms"
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
	form, err := s.readUploadForm(req.Body)
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
// reported as such. Only blocked extensions and the size limit of the
// file's kind apply (apps.DefaultSystemParameters).
func (s *Server) readUploadForm(body *multipart.Reader) (*uploadForm, error) {
	form := &uploadForm{}
	err := forms.Read(body, forms.Spec{
		NoFile:        forms.NoFile(),
		RequireName:   true,
		HoldFileError: true,
		File: func(f forms.File) (err error) {
			form.staged, err = s.uploads.Stage(files.Rules{Limits: apps.DefaultSystemParameters}, f.Name, f.ContentType, f.Body)
			return err
		},
		Fields: map[string]forms.Field{"user": {Max: maxFormFieldSize, TooLong: apperr.InvalidParam("user is too long"), Set: func(b []byte) error {
			if bytes.IndexByte(b, 0) >= 0 {
				return validation.NULError(`form field "user"`)
			}
			form.user = string(b)
			return nil
		}}},
	})
	if err != nil {
		form.staged.Discard()
		return nil, err
	}
	return form, nil
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
	return filePreview{Name: meta.Name, MimeType: meta.MimeType, Body: content, Size: content.Size,
		Attachment: req.Params.AsAttachment != nil && *req.Params.AsAttachment}, nil
}

// filePreview writes a file's bytes. The generated response type always
// says application/octet-stream and has no way to add headers, so this one
// implements the response interface itself.
type filePreview forms.Preview

func (r filePreview) VisitPreviewChatFileResponse(w http.ResponseWriter) error {
	return forms.Preview(r).Write(w)
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
	return forms.Preview{Name: f.Name, MimeType: f.MimeType, Body: content, Size: content.Size}.Write(c.Response())
}
