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

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
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

// Rules are what an upload must satisfy. As in Dify, an upload is not held
// to the app's file settings (those apply when the file is attached to a
// message or run, see Resolve): any file is taken unless its extension is
// blocked, up to the size limit of its kind.
type Rules struct {
	Limits apps.SystemParameters
	// Blocked are extensions (without the dot, lower case) never taken;
	// nil means DefaultBlocked.
	Blocked []string
}

// DefaultBlocked are the extensions refused by default: programs and
// scripts that run when opened on a desktop system.
var DefaultBlocked = []string{
	"exe", "msi", "msp", "com", "scr", "pif", "cpl", "dll", "sys", "bat", "cmd",
	"vbs", "vbe", "js", "jse", "wsf", "wsh", "hta", "ps1", "psm1", "lnk", "reg", "jar", "app", "apk",
}

// CodeExtensionBlocked is the error code of a blocked extension (400).
const CodeExtensionBlocked = apperr.CodeExtensionBlocked

// Allows reports whether a file with this extension may be uploaded.
func (r Rules) Allows(ext string) bool {
	blocked := r.Blocked
	if blocked == nil {
		blocked = DefaultBlocked
	}
	return !slices.Contains(blocked, normalizeExt(ext))
}

// Place is one part of an app that takes files: the file upload feature or
// a file field of its input form.
type Place struct {
	// Types are the kinds it accepts; empty means every kind.
	Types []string
	// Extensions are the extensions a custom file may have.
	Extensions []string
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
