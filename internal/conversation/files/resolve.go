package files

import (
	"context"
	"mime"
	"slices"
	"strings"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// Ref is one entry of the `files` list of a message or run request.
type Ref struct {
	// Type is image, document, audio, video or custom.
	Type string `json:"type"`
	// TransferMethod is local_file or remote_url.
	TransferMethod string `json:"transfer_method"`
	// URL is set for remote_url.
	URL string `json:"url,omitempty"`
	// UploadFileID is set for local_file: the id the upload returned.
	UploadFileID string `json:"upload_file_id,omitempty"`
}

// Resolved is a file of a request, stored and ready to be read (see
// Store.Open).
type Resolved struct {
	// Type and TransferMethod are as the request gave them.
	Type           string
	TransferMethod string
	// RemoteURL is the URL a remote_url file was given as.
	RemoteURL string
	// File is the stored file: the earlier upload for local_file, a new
	// upload owned by the same end user for remote_url.
	File *models.UploadFile
}

// Resolve turns the `files` of a request by end user endUserID (an id, as
// endusers.Store gives it) to appID into stored files, checking them
// against the app's file upload settings:
//
//   - When the app takes no files at all, the list is ignored and nil is
//     returned, as Dify does.
//   - More files than the app's number limit, a transfer method or kind
//     the app does not accept, or a missing url / upload_file_id give 400
//     invalid_param naming the entry.
//   - local_file must name an upload of the same app and end user;
//     anything else is 404 file_not_found (other users' files are not
//     revealed).
//   - remote_url is fetched through s.Remote (see Guard) and stored; a
//     refused address or failed fetch is 400 invalid_param, content over
//     the size limit for its kind 413 file_too_large.
func (s *Store) Resolve(ctx context.Context, appID, endUserID string, refs []Ref) ([]Resolved, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	_, def, err := s.apps.Load(ctx, appID)
	if err != nil {
		return nil, err
	}
	settings := apps.ParametersFor(def, s.Limits).FileUpload
	var kinds []string
	switch {
	case settings.Enabled:
		kinds = settings.AllowedFileTypes
	case settings.Image.Enabled:
		kinds = []string{TypeImage}
	default:
		return nil, nil
	}
	if limit := settings.NumberLimits; limit > 0 && len(refs) > limit {
		return nil, apperr.InvalidParam("files: at most %d files may be sent, not %d.", limit, len(refs))
	}
	methods := settings.AllowedFileUploadMethods
	out := make([]Resolved, 0, len(refs))
	for i, ref := range refs {
		r, err := s.resolveOne(ctx, appID, endUserID, i, ref, kinds, settings.AllowedFileExtensions, methods)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (s *Store) resolveOne(ctx context.Context, appID, endUserID string, i int, ref Ref, kinds, exts, methods []string) (Resolved, error) {
	if !slices.Contains([]string{TypeImage, TypeDocument, TypeAudio, TypeVideo, TypeCustom}, ref.Type) {
		return Resolved{}, apperr.InvalidParam("files[%d].type: %q is not one of image, document, audio, video, custom.", i, ref.Type)
	}
	if len(kinds) > 0 && ref.Type != TypeCustom && !slices.Contains(kinds, ref.Type) {
		return Resolved{}, apperr.InvalidParam("files[%d].type: this app does not accept %s files.", i, ref.Type)
	}
	if ref.TransferMethod != LocalFile && ref.TransferMethod != RemoteURL {
		return Resolved{}, apperr.InvalidParam("files[%d].transfer_method: %q is not local_file or remote_url.", i, ref.TransferMethod)
	}
	if len(methods) > 0 && !slices.Contains(methods, ref.TransferMethod) {
		return Resolved{}, apperr.InvalidParam("files[%d].transfer_method: this app does not accept %s files.", i, ref.TransferMethod)
	}

	res := Resolved{Type: ref.Type, TransferMethod: ref.TransferMethod}
	switch ref.TransferMethod {
	case LocalFile:
		id := strings.TrimSpace(ref.UploadFileID)
		if id == "" {
			return Resolved{}, apperr.InvalidParam("files[%d].upload_file_id is required for local_file.", i)
		}
		f, err := s.Get(ctx, id)
		if err != nil {
			return Resolved{}, err
		}
		if f.AppID == nil || *f.AppID != appID || f.EndUserID == nil || *f.EndUserID != endUserID {
			return Resolved{}, fileNotFound()
		}
		res.File = f
	case RemoteURL:
		if strings.TrimSpace(ref.URL) == "" {
			return Resolved{}, apperr.InvalidParam("files[%d].url is required for remote_url.", i)
		}
		f, err := s.fetch(ctx, appID, endUserID, ref.URL)
		if err != nil {
			return Resolved{}, err
		}
		res.File = f
		res.RemoteURL = ref.URL
	}
	// A custom file passes the kind check above but must have one of the
	// app's custom extensions.
	if ref.Type == TypeCustom && len(kinds) > 0 && !(Place{Types: []string{TypeCustom}, Extensions: exts}).allows(res.File.Extension) {
		return Resolved{}, apperr.InvalidParam("files[%d]: this app does not accept %s files.", i, displayExt(res.File.Extension))
	}
	if _, err := storageKey(res.File); err != nil {
		return Resolved{}, err
	}
	return res, nil
}

// fetch downloads a remote file through the guard and stores it for the
// end user. The size limit is that of the file's kind, judged from its
// name or, lacking an extension, from its media type.
func (s *Store) fetch(ctx context.Context, appID, endUserID, rawURL string) (*models.UploadFile, error) {
	remote, err := s.Remote.Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	defer remote.Close()
	name := remote.Name
	if Extension(name) == "" {
		if ext := extensionForType(remote.MimeType); ext != "" {
			name += "." + ext
		}
	}
	rules := Rules{Limits: s.Limits}
	if limit := rules.SizeLimit(Extension(name)); remote.ContentLength > limit {
		return nil, apperr.Fail(apperr.CodeFileTooLarge,
			"The file at %s is larger than %d MB, the limit for %s files.", rawURL, limit>>20, KindOf(Extension(name)))
	}
	mimeType := remote.MimeType
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	staged, err := s.Stage(rules, name, mimeType, remote.Body)
	if err != nil {
		return nil, err
	}
	return staged.Commit(ctx, appID, endUserID)
}

// preferredExtension gives the usual extension of common media types,
// where mime.ExtensionsByType would list several.
var preferredExtension = map[string]string{
	"image/jpeg":      "jpg",
	"image/png":       "png",
	"image/gif":       "gif",
	"image/webp":      "webp",
	"image/svg+xml":   "svg",
	"application/pdf": "pdf",
	"text/plain":      "txt",
	"text/markdown":   "md",
	"text/html":       "html",
	"text/csv":        "csv",
	"audio/mpeg":      "mp3",
	"audio/wav":       "wav",
	"audio/x-wav":     "wav",
	"video/mp4":       "mp4",
	"video/webm":      "webm",
}

func extensionForType(mt string) string {
	if mt == "" || mt == "application/octet-stream" {
		return ""
	}
	if ext, ok := preferredExtension[mt]; ok {
		return ext
	}
	if exts, _ := mime.ExtensionsByType(mt); len(exts) > 0 {
		return normalizeExt(exts[0])
	}
	return ""
}
