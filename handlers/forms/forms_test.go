package forms

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"appkb/internal/platform/apperr"
)

const boundary = "XyZ"

// body builds a multipart body from raw parts, each its headers and bytes.
func body(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString("--" + boundary + "\r\n" + p + "\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
	return b.String()
}

func filePart(name, content string) string {
	return "Content-Disposition: form-data; name=\"file\"; filename=\"" + name + "\"\r\nContent-Type: text/plain\r\n\r\n" + content
}

func fieldPart(name, value string) string {
	return "Content-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value
}

// specs are the three ways the handlers read forms: a spooled document
// with a `data` field, a staged upload with a bounded `user` field, and a
// recording read from the first file part.
func specs(dir string) ([]Spec, *Spool) {
	tooBig := func(f File) error {
		n, err := io.Copy(io.Discard, io.LimitReader(f.Body, 65))
		if err != nil {
			return ReadError(err)
		}
		if n > 64 {
			return apperr.New(http.StatusRequestEntityTooLarge, apperr.CodeFileTooLarge, "too large")
		}
		return nil
	}
	spool := &Spool{Dir: dir, Limit: 64}
	return []Spec{
		{RequireName: true, File: func(f File) error { spool.Close(); spool.File = nil; return spool.Take(f.Body) },
			Fields: map[string]Field{"data": {Max: 16, Set: func(b []byte) error {
				if bytes.HasPrefix(b, []byte("bad")) {
					return apperr.InvalidParam("bad data")
				}
				return nil
			}}}},
		{NoFile: NoFile(), RequireName: true, HoldFileError: true, File: tooBig,
			Fields: map[string]Field{"user": {Max: 8, TooLong: apperr.InvalidParam("user is too long")}}},
		{NoFile: apperr.New(http.StatusBadRequest, apperr.CodeNoAudioUploaded, "none"), StopAtFile: true, File: tooBig},
	}, spool
}

func code(err error) string {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

func TestReadChecks(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		codes [3]string // per spec of specs
	}{
		{"one file", body(filePart("a.txt", "hi"), fieldPart("user", "u")), [3]string{"", "", ""}},
		{"no file", body(fieldPart("user", "u")), [3]string{"", apperr.CodeNoFileUploaded, apperr.CodeNoAudioUploaded}},
		{"two files", body(filePart("a.txt", "x"), filePart("b.txt", "y")), [3]string{apperr.CodeTooManyFiles, apperr.CodeTooManyFiles, ""}},
		{"blank name", body(filePart(" ", "x")), [3]string{apperr.CodeFilenameNotExists, apperr.CodeFilenameNotExists, ""}},
		{"blank name then second file", body(filePart("", "x"), filePart("b", "y")), [3]string{apperr.CodeFilenameNotExists, apperr.CodeTooManyFiles, ""}},
		{"file too large", body(filePart("a", strings.Repeat("x", 65))), [3]string{apperr.CodeFileTooLarge, apperr.CodeFileTooLarge, apperr.CodeFileTooLarge}},
		{"long user", body(filePart("a", "x"), fieldPart("user", "123456789")), [3]string{"", apperr.CodeInvalidParam, ""}},
		{"bad data", body(fieldPart("data", "bad"), filePart("a", "x")), [3]string{apperr.CodeInvalidParam, "", ""}},
		{"unterminated file", "--" + boundary + "\r\n" + filePart("a", "abc"), [3]string{apperr.CodeInvalidParam, apperr.CodeInvalidParam, apperr.CodeInvalidParam}},
		{"unnamed file part", body(fieldPart("file", "abc")), [3]string{apperr.CodeFilenameNotExists, apperr.CodeFilenameNotExists, ""}},
	}
	for _, tc := range cases {
		all, spool := specs(t.TempDir())
		for i, spec := range all {
			err := Read(multipart.NewReader(strings.NewReader(tc.body), boundary), spec)
			if got := code(err); got != tc.codes[i] {
				t.Errorf("%s, spec %d: code %q (%v), want %q", tc.name, i, got, err, tc.codes[i])
			}
		}
		spool.Close()
	}
	all, _ := specs(t.TempDir())
	for i, spec := range all {
		if got, want := code(Read(nil, spec)), [3]string{"", apperr.CodeNoFileUploaded, apperr.CodeNoAudioUploaded}[i]; got != want {
			t.Errorf("nil body, spec %d: code %q, want %q", i, got, want)
		}
	}
}

func TestReadBodyLimit(t *testing.T) {
	b := body(fieldPart("user", "u"), filePart("a", strings.Repeat("x", 6000)))
	r := http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(b)), 5000)
	all, _ := specs(t.TempDir())
	err := Read(multipart.NewReader(r, boundary), all[1])
	if code(err) != apperr.CodeTooLarge {
		t.Fatalf("got %v, want too_large", err)
	}
}

// FuzzRead feeds arbitrary bodies to Read under each handler's spec: it
// must never panic, and every error it gives is an *apperr.Error.
func FuzzRead(f *testing.F) {
	f.Add([]byte(body(filePart("a.txt", "hello"), fieldPart("data", `{"indexing_technique":"economy"}`))), int64(1<<20))
	f.Add([]byte(body(fieldPart("user", "abc"), filePart("b.pdf", "%PDF"))), int64(100))
	f.Add([]byte(body(filePart("a", "x"), filePart("b", "y"))), int64(1<<20))
	f.Add([]byte(body(filePart("", "x"))), int64(1<<20))
	f.Add([]byte("--"+boundary+"\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nunterminated"), int64(1<<20))
	f.Add([]byte("--"+boundary+"\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''%E2%82%AC.txt\r\n\r\nx\r\n--"+boundary+"--"), int64(10))
	f.Add([]byte("garbage"), int64(0))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, limit int64) {
		all, spool := specs(dir)
		defer spool.Close()
		for i, spec := range all {
			var r io.Reader = bytes.NewReader(data)
			if limit >= 0 && limit < int64(len(data)) {
				r = http.MaxBytesReader(nil, io.NopCloser(r), limit)
			}
			err := Read(multipart.NewReader(r, boundary), spec)
			var ae *apperr.Error
			if err != nil && !errors.As(err, &ae) {
				t.Fatalf("spec %d: error %T %v is not an *apperr.Error", i, err, err)
			}
		}
	})
}
