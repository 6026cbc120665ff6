package forms

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Preview writes the bytes of an uploaded file, inline with its own type
// or as a download.
type Preview struct {
	// Name is the file name given in Content-Disposition.
	Name string
	// MimeType is the file's type; "" is sent as application/octet-stream.
	MimeType string
	// Body is the file's bytes, closed by Write.
	Body io.ReadCloser
	// Size is the length of Body.
	Size int64
	// Attachment asks for a download: type application/octet-stream.
	Attachment bool
}

// Write answers 200 with the file and its headers.
func (p Preview) Write(w http.ResponseWriter) error {
	defer p.Body.Close()
	h := w.Header()
	disposition := "inline"
	contentType := p.MimeType
	if p.Attachment {
		disposition = "attachment"
		contentType = "application/octet-stream"
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	h.Set("Content-Type", contentType)
	if v := mime.FormatMediaType(disposition, map[string]string{"filename": p.Name}); v != "" {
		h.Set("Content-Disposition", v)
	} else {
		h.Set("Content-Disposition", disposition)
	}
	h.Set("Content-Length", fmt.Sprint(p.Size))
	// The bytes came from a client: never let a browser run them as a page
	// of this origin or guess another type for them.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=3600")
	w.WriteHeader(http.StatusOK)
	_, err := io.Copy(w, p.Body)
	return err
}

// Download answers r with body as an attachment called name. A body that
// seeks goes through http.ServeContent, which answers range requests;
// another is copied whole with size as its length. mimeType "" leaves the
// type to ServeContent, or application/octet-stream. The caller closes
// body.
func Download(w http.ResponseWriter, r *http.Request, name, mimeType string, body io.Reader, size int64) error {
	h := w.Header()
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename*=UTF-8''%s", url.PathEscape(name)))
	if mimeType != "" {
		h.Set("Content-Type", mimeType)
	}
	if rs, ok := body.(io.ReadSeeker); ok {
		http.ServeContent(w, r, "", time.Time{}, rs)
		return nil
	}
	if mimeType == "" {
		h.Set("Content-Type", "application/octet-stream")
	}
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	_, err := io.Copy(w, body)
	return err
}
