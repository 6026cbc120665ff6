package forms

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPreviewHeaders(t *testing.T) {
	for _, tc := range []struct {
		mime       string
		attachment bool
		wantType   string
		wantDisp   string
	}{
		{"image/png", false, "image/png", `inline; filename="a b.png"`},
		{"", false, "application/octet-stream", `inline; filename="a b.png"`},
		{"image/png", true, "application/octet-stream", `attachment; filename="a b.png"`},
	} {
		w := httptest.NewRecorder()
		err := Preview{Name: "a b.png", MimeType: tc.mime, Body: io.NopCloser(strings.NewReader("abc")), Size: 3, Attachment: tc.attachment}.Write(w)
		if err != nil {
			t.Fatal(err)
		}
		h := w.Header()
		if h.Get("Content-Type") != tc.wantType || h.Get("Content-Disposition") != tc.wantDisp || h.Get("Content-Length") != "3" ||
			h.Get("X-Content-Type-Options") != "nosniff" || w.Body.String() != "abc" {
			t.Errorf("%+v: headers %v, body %q", tc, h, w.Body.String())
		}
	}
}

func TestDownload(t *testing.T) {
	// A reader that seeks goes through ServeContent, which answers ranges.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Range", "bytes=1-")
	if err := Download(w, r, "ä b.txt", "text/plain", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	if w.Code != 206 || w.Body.String() != "bc" || w.Header().Get("Content-Disposition") != "attachment; filename*=UTF-8''%C3%A4%20b.txt" {
		t.Errorf("seeker: %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	// Any other reader is copied whole.
	w = httptest.NewRecorder()
	if err := Download(w, r, "a", "", io.MultiReader(strings.NewReader("abc")), 3); err != nil {
		t.Fatal(err)
	}
	if w.Code != 200 || w.Body.String() != "abc" || w.Header().Get("Content-Type") != "application/octet-stream" || w.Header().Get("Content-Length") != "3" {
		t.Errorf("plain reader: %d %q %v", w.Code, w.Body.String(), w.Header())
	}
}
