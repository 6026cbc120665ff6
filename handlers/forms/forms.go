// Package forms reads the multipart forms of the file operations and writes
// stored files back to clients. Read walks the parts of a form once, in the
// order they arrive, and applies the checks Dify makes (no file, more than
// one file, a file without a name, field sizes); what happens to the file
// and to each plain field is up to the caller.
package forms

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strings"

	"appkb/internal/platform/apperr"
)

// File is the file part of a form as the caller's File function sees it.
type File struct {
	// Name is the part's filename parameter exactly as sent ("" when the
	// part has none).
	Name string
	// ContentType is the part's own Content-Type header.
	ContentType string
	// Body is the part's bytes; it is valid only during the call.
	Body io.Reader
}

// Field is a plain (non-file) field of a form.
type Field struct {
	// Max is the most bytes of the field that are read.
	Max int64
	// TooLong, when set, is the error for a field longer than Max; without
	// it, a longer field is cut at Max.
	TooLong error
	// Set receives the field's bytes; its error ends the read.
	Set func([]byte) error
}

// Spec says which parts a form has and what becomes of them. A part is a
// file when it has a filename parameter or is named `file`.
type Spec struct {
	// NoFile, when set, makes the file required: it is the error for a
	// missing body or a form without a file part.
	NoFile error
	// RequireName rejects a file part without a non-blank filename with
	// 400 filename_not_exists_error.
	RequireName bool
	// File receives the first file part; later file parts are skipped and
	// reported as too many files once the form is read.
	File func(File) error
	// HoldFileError keeps an error of the file part (missing name, or one
	// from File) until every part is read, so that a second file is still
	// reported as too many files; without it the error ends the read.
	HoldFileError bool
	// StopAtFile ends the read with the first file part: later parts are
	// never read.
	StopAtFile bool
	// Fields are the plain fields read, by form name; other parts are
	// skipped.
	Fields map[string]Field
}

// NoFile is the error of a form that must carry a file and has none.
func NoFile() *apperr.Error {
	return apperr.New(http.StatusBadRequest, apperr.CodeNoFileUploaded, "No file was uploaded.")
}

// Read walks the parts of body as spec says. A nil body is a form without
// parts. Errors reading the body are mapped by ReadError; the others are
// spec's own or those of its functions.
func Read(body *multipart.Reader, spec Spec) error {
	if body == nil {
		return spec.NoFile
	}
	files := 0
	var fileErr error
	for {
		part, err := body.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ReadError(err)
		}
		name, hasName := FileName(part)
		field, isField := spec.Fields[part.FormName()]
		switch {
		case hasName || part.FormName() == "file":
			files++
			if files > 1 || fileErr != nil {
				break
			}
			if spec.RequireName && (!hasName || strings.TrimSpace(name) == "") {
				fileErr = apperr.New(http.StatusBadRequest, apperr.CodeFilenameNotExists, "The uploaded file has no file name.")
			} else if spec.File != nil {
				fileErr = spec.File(File{Name: name, ContentType: part.Header.Get("Content-Type"), Body: part})
			}
			if spec.StopAtFile {
				part.Close()
				return fileErr
			}
			if fileErr != nil && !spec.HoldFileError {
				return fileErr
			}
		case isField:
			if err := readField(part, field); err != nil {
				return err
			}
		}
		part.Close()
	}
	switch {
	case files == 0 && spec.NoFile != nil:
		return spec.NoFile
	case files > 1:
		return apperr.New(http.StatusBadRequest, apperr.CodeTooManyFiles, "Only one file may be uploaded at a time.")
	}
	return fileErr
}

// readField reads one plain field within its bounds and hands it to Set.
func readField(part io.Reader, f Field) error {
	limit := f.Max
	if f.TooLong != nil {
		limit++
	}
	b, err := io.ReadAll(io.LimitReader(part, limit))
	if err != nil {
		return ReadError(err)
	}
	if f.TooLong != nil && int64(len(b)) > f.Max {
		return f.TooLong
	}
	if f.Set == nil {
		return nil
	}
	return f.Set(b)
}

// FileName returns the filename parameter of a part exactly as sent
// (multipart.Part.FileName would cut it down to its last path segment),
// and whether the parameter is there at all.
func FileName(p *multipart.Part) (string, bool) {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return "", false
	}
	name, ok := params["filename"]
	return name, ok
}

// ReadError maps an error reading a multipart body: 413 too_large past the
// body limit, 400 invalid_param for anything else.
func ReadError(err error) *apperr.Error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return apperr.New(http.StatusRequestEntityTooLarge, apperr.CodeTooLarge, "The request body is too large.")
	}
	return apperr.Wrap(err, http.StatusBadRequest, apperr.CodeInvalidParam, "The multipart body cannot be read.")
}

// Spool keeps a form's file part in a temporary file under Dir while the
// request is served.
type Spool struct {
	// Dir is where the file is written; it is made when missing.
	Dir string
	// Limit is the most bytes the file may have.
	Limit int64
	// File is the written file, read from its start; nil until Take.
	File *os.File
}

// Take writes r to a new temporary file and rewinds it. More than Limit
// bytes is 413 file_too_large. The file stays until Close, also when Take
// fails.
func (s *Spool) Take(r io.Reader) error {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	var err error
	if s.File, err = os.CreateTemp(s.Dir, ".document-*"); err != nil {
		return err
	}
	n, err := io.Copy(s.File, io.LimitReader(r, s.Limit+1))
	if err != nil {
		return ReadError(err)
	}
	if n > s.Limit {
		return apperr.New(http.StatusRequestEntityTooLarge, apperr.CodeFileTooLarge, "The file is larger than %d MB.", s.Limit>>20)
	}
	_, err = s.File.Seek(0, io.SeekStart)
	return err
}

// Close removes the spooled file, if any.
func (s *Spool) Close() {
	if s != nil && s.File != nil {
		s.File.Close()
		os.Remove(s.File.Name())
	}
}
