package workflow

import (
	"errors"
	"io"
	"mime"
	"path"
	"strings"

	"appkb/internal/conversation/files"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/docparse"
)

// plainTextExts are extensions of text formats docparse has no parser of
// its own for; their files are read as plain text.
var plainTextExts = map[string]bool{
	"yaml": true, "yml": true, "xml": true, "log": true, "ini": true, "conf": true, "toml": true,
	"properties": true, "mdx": true, "vtt": true, "srt": true, "sql": true, "sh": true,
	"py": true, "js": true, "ts": true, "go": true, "java": true, "c": true, "h": true, "cpp": true,
}

// mimeExts gives an extension to a fetched file whose name has none that
// can be read.
var mimeExts = map[string]string{
	"text/plain": "txt", "text/markdown": "md", "text/html": "html", "application/xhtml+xml": "html",
	"text/csv": "csv", "application/json": "json", "application/pdf": "pdf",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":       "xlsx",
}

// readableExt gives the extension docparse reads a file as, or "" when the
// file cannot be read.
func readableExt(ext string) string {
	ext = strings.ToLower(strings.TrimPrefix(ext, "."))
	switch {
	case docparse.Supported(ext):
		return ext
	case plainTextExts[ext]:
		return "txt"
	}
	return ""
}

// runDocExtractor turns the file, or each file of a list, into text. A
// single file gives a string, a list an array of strings.
func runDocExtractor(x *nodeRun) (*outcome, error) {
	sel := x.n.cfg.(*docExtractConfig).selector
	v, ok := x.pool.Get(sel)
	inputs := map[string]any{"variable_selector": sel}
	if !ok || v == nil {
		return &outcome{inputs: inputs}, nodeErr("DocumentExtractorError", "The document extractor %q found no file in %s.", x.n.title, strings.Join(sel, "."))
	}
	if list, isList := asList(v); isList {
		texts := make([]any, 0, len(list))
		docs := make([]any, 0, len(list))
		for i, e := range list {
			f, ok := asFile(e)
			if !ok {
				return &outcome{inputs: inputs}, nodeErr("DocumentExtractorError", "Item %d of %s is not a file.", i, strings.Join(sel, "."))
			}
			text, err := x.extractFile(f)
			if err != nil {
				return &outcome{inputs: inputs}, err
			}
			texts = append(texts, text)
			docs = append(docs, docInfo(f, text))
		}
		return &outcome{inputs: inputs, process: map[string]any{"documents": docs}, outputs: map[string]any{"text": texts}}, nil
	}
	f, ok := asFile(v)
	if !ok {
		return &outcome{inputs: inputs}, nodeErr("DocumentExtractorError", "The variable %s is a %s, not a file.", strings.Join(sel, "."), TypeOf(v))
	}
	text, err := x.extractFile(f)
	if err != nil {
		return &outcome{inputs: inputs}, err
	}
	return &outcome{inputs: inputs, process: map[string]any{"documents": []any{docInfo(f, text)}}, outputs: map[string]any{"text": text}}, nil
}

func docInfo(f File, text string) map[string]any {
	return map[string]any{"filename": f.Filename, "extension": f.Extension, "characters": float64(len([]rune(text)))}
}

// asFile reads a file value of the pool.
func asFile(v any) (File, bool) {
	switch x := v.(type) {
	case File:
		return x, true
	case *File:
		if x != nil {
			return *x, true
		}
	case map[string]any:
		return FileFromMap(x)
	}
	return File{}, false
}

// fileLabel names a file in errors.
func fileLabel(f File) string {
	switch {
	case f.Filename != "":
		return f.Filename
	case f.RelatedID != "":
		return f.RelatedID
	case f.ID != "":
		return f.ID
	case f.RemoteURL != "":
		return f.RemoteURL
	}
	return f.URL
}

// extractFile reads one file and parses it.
func (x *nodeRun) extractFile(f File) (string, error) {
	if f.TransferMethod == "remote_url" || (f.TransferMethod == "" && f.RelatedID == "" && f.ID == "" && (f.RemoteURL != "" || f.URL != "")) {
		return x.extractRemote(f)
	}
	return x.extractUpload(f)
}

// extractUpload reads a file kept in Engine.Files.
func (x *nodeRun) extractUpload(f File) (string, error) {
	id := f.RelatedID
	if id == "" {
		id = f.ID
	}
	label := fileLabel(f)
	store := x.r.e.Files
	if store == nil {
		return "", nodeErr("DocumentExtractorError", "The file %q cannot be read: this server keeps no uploaded files for workflows.", label)
	}
	if id == "" {
		return "", nodeErr("DocumentExtractorError", "The file %q names no uploaded file.", label)
	}
	row, err := store.Get(x.ctx, id)
	if err != nil {
		if apperr.Is(err, apperr.CodeFileNotFound) {
			return "", nodeErr("DocumentExtractorError", "The file %q does not exist.", label)
		}
		return "", nodeErr("DocumentExtractorError", "Looking up the file %q failed: %v", label, err)
	}
	if x.r.in.AppID != "" && row.AppID != nil && *row.AppID != x.r.in.AppID {
		return "", nodeErr("DocumentExtractorError", "The file %q belongs to another app.", label)
	}
	name := row.Name
	if name == "" {
		name = f.Filename
	}
	ext := row.Extension
	if ext == "" {
		ext = docparse.Ext(name)
	}
	as := readableExt(ext)
	if as == "" {
		return "", unsupportedFile(name, ext)
	}
	fh, err := store.Open(x.ctx, row)
	if err != nil {
		if apperr.Is(err, apperr.CodeFileNotFound) {
			return "", nodeErr("DocumentExtractorError", "The content of the file %q is missing.", name)
		}
		return "", nodeErr("DocumentExtractorError", "The file %q cannot be read: %v", name, err)
	}
	defer fh.Close()
	return parseDoc(name, as, fh, fh.Size)
}

// extractRemote fetches a remote_url file through the SSRF guard.
func (x *nodeRun) extractRemote(f File) (string, error) {
	raw := f.RemoteURL
	if raw == "" {
		raw = f.URL
	}
	g := x.r.e.HTTPGuard
	if g == nil {
		g = &files.Guard{}
	}
	// Decide from the declared name first, so that an unreadable type is
	// refused before anything is fetched.
	name := f.Filename
	ext := f.Extension
	if ext == "" {
		ext = docparse.Ext(name)
	}
	as := readableExt(ext)
	if name != "" && ext != "" && as == "" {
		return "", unsupportedFile(name, ext)
	}
	rem, err := g.Open(x.ctx, raw)
	if err != nil {
		msg := err.Error()
		var ae *apperr.Error
		if errors.As(err, &ae) {
			msg = ae.Message
		}
		return "", nodeErr("DocumentExtractorError", "The file %q could not be fetched: %s", fileLabel(f), strings.TrimSuffix(msg, "."))
	}
	defer rem.Close()
	if as == "" {
		if name == "" {
			name = rem.Name
		}
		ext = docparse.Ext(rem.Name)
		as = readableExt(ext)
		if as == "" {
			if byType := mimeExts[rem.MimeType]; byType != "" {
				as = byType
			} else if exts, _ := mime.ExtensionsByType(rem.MimeType); len(exts) > 0 {
				as = readableExt(exts[0])
			}
		}
		if as == "" {
			if ext == "" {
				ext = path.Ext(rem.URL.Path)
			}
			return "", unsupportedFile(name, ext)
		}
	}
	return parseDoc(name, as, rem.Body, rem.ContentLength)
}

func unsupportedFile(name, ext string) error {
	ext = strings.TrimPrefix(ext, ".")
	if ext == "" {
		return nodeErr("UnsupportedFileTypeError", "The file %q has no extension, so the document extractor cannot tell how to read it.", name)
	}
	return nodeErr("UnsupportedFileTypeError", "The file %q is of type .%s, which the document extractor cannot read (it reads %s).",
		name, ext, strings.Join(docparse.Extensions(), ", "))
}

// parseDoc parses r as a file of extension as; docparse's limits cap the
// size read.
func parseDoc(name, as string, r io.Reader, size int64) (string, error) {
	doc, err := docparse.Parse("document."+as, r, size)
	if err != nil {
		return "", nodeErr("DocumentExtractorError", "The file %q cannot be read: %v", name, err)
	}
	return doc.Text, nil
}
