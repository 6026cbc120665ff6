// Package files keeps the files that clients upload for an app's messages
// and runs: it checks them against the app's upload settings, stores their
// bytes under the data directory (by id, never by the client's name), serves
// them back to their owner, and turns the `files` of a message request into
// stored files, fetching remote URLs through an address guard.
package files

import (
	"path"
	"slices"
	"strings"

	"appkb/apps"
)

// File kinds, as message requests and app settings name them.
const (
	TypeImage    = "image"
	TypeDocument = "document"
	TypeAudio    = "audio"
	TypeVideo    = "video"
	TypeCustom   = "custom"
)

// Transfer methods of a file in a message request.
const (
	LocalFile = "local_file"
	RemoteURL = "remote_url"
)

// kindOfExtension sorts the extensions Dify knows into kinds. Anything else
// is a custom file.
var kindOfExtension = func() map[string]string {
	m := map[string]string{}
	add := func(kind string, exts ...string) {
		for _, e := range exts {
			m[e] = kind
		}
	}
	add(TypeImage, "jpg", "jpeg", "png", "webp", "gif", "svg")
	add(TypeVideo, "mp4", "mov", "mpeg", "webm")
	add(TypeAudio, "mp3", "m4a", "wav", "amr", "mpga")
	add(TypeDocument, "txt", "markdown", "md", "mdx", "pdf", "html", "htm", "xlsx", "xls",
		"vtt", "properties", "doc", "docx", "csv", "eml", "msg", "pptx", "ppt", "xml", "epub")
	return m
}()

// KindOf returns the kind of a file from its extension (with or without
// the dot, any case): image, document, audio, video, or custom.
func KindOf(ext string) string {
	if kind, ok := kindOfExtension[normalizeExt(ext)]; ok {
		return kind
	}
	return TypeCustom
}

// Extension returns a file name's extension in lower case, without the dot.
func Extension(name string) string {
	return normalizeExt(path.Ext(name))
}

func normalizeExt(ext string) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(ext), "."))
}

// Rules are what an app accepts as an upload: the size limit per kind, and
// the places of the app that take files at all.
type Rules struct {
	Limits apps.SystemParameters
	// Places holds one entry per part of the app that takes files (the
	// file upload feature, file fields of the input form). A file must suit
	// at least one of them. With no places at all, any kind is accepted, as
	// Dify does: the app may still pass the file on in some other way.
	Places []Place
}

// Place is one part of an app that takes files.
type Place struct {
	// Types are the kinds it accepts; empty means every kind.
	Types []string
	// Extensions are the extensions a custom file may have.
	Extensions []string
}

// RulesFor works out an app's upload rules from its definition.
func RulesFor(def *apps.Definition, limits apps.SystemParameters) Rules {
	r := Rules{Limits: limits}
	if def == nil {
		return r
	}
	up := apps.ParametersFor(def, limits).FileUpload
	switch {
	case up.Enabled:
		r.Places = append(r.Places, Place{Types: up.AllowedFileTypes, Extensions: up.AllowedFileExtensions})
	case up.Image.Enabled:
		r.Places = append(r.Places, Place{Types: []string{TypeImage}})
	}
	for _, f := range def.InputForm() {
		if f.Kind == apps.FieldFile || f.Kind == apps.FieldFileList {
			r.Places = append(r.Places, Place{Types: f.AllowedFileTypes, Extensions: f.AllowedFileExtensions})
		}
	}
	return r
}

// Allows reports whether a file with this extension suits some place of
// the app.
func (r Rules) Allows(ext string) bool {
	if len(r.Places) == 0 {
		return true
	}
	for _, p := range r.Places {
		if p.allows(ext) {
			return true
		}
	}
	return false
}

func (p Place) allows(ext string) bool {
	if len(p.Types) == 0 {
		return true
	}
	if kind := KindOf(ext); kind != TypeCustom && slices.Contains(p.Types, kind) {
		return true
	}
	if !slices.Contains(p.Types, TypeCustom) {
		return false
	}
	ext = normalizeExt(ext)
	return ext != "" && slices.ContainsFunc(p.Extensions, func(e string) bool { return normalizeExt(e) == ext })
}

// SizeLimit returns the largest size in bytes allowed for a file with this
// extension; the limits are set in MB per kind.
func (r Rules) SizeLimit(ext string) int64 {
	mb := r.Limits.FileSizeLimit
	def := apps.DefaultSystemParameters.FileSizeLimit
	switch KindOf(ext) {
	case TypeImage:
		mb, def = r.Limits.ImageFileSizeLimit, apps.DefaultSystemParameters.ImageFileSizeLimit
	case TypeAudio:
		mb, def = r.Limits.AudioFileSizeLimit, apps.DefaultSystemParameters.AudioFileSizeLimit
	case TypeVideo:
		mb, def = r.Limits.VideoFileSizeLimit, apps.DefaultSystemParameters.VideoFileSizeLimit
	}
	if mb <= 0 {
		mb = def
	}
	return int64(mb) << 20
}
