package conversations

import (
	"reflect"
	"testing"
	"time"
)

type fakeLinks struct{ now time.Time }

func (f *fakeLinks) URL(id string, now time.Time) string {
	f.now = now
	return "signed:" + id
}

func TestSignLocalFiles(t *testing.T) {
	str := func(s string) *string { return &s }
	fs := []MessageFile{
		{ID: "a", TransferMethod: "local_file"},
		{ID: "b", TransferMethod: "local_file", UploadFileID: str("up-b")},
		{ID: "c", TransferMethod: "local_file", UploadFileID: str(""), URL: str("")},
		{ID: "d", TransferMethod: "local_file", URL: str("https://kept")},
		{ID: "e", TransferMethod: "remote_url"},
		{ID: "f", TransferMethod: "tool_file", UploadFileID: str("up-f")},
	}
	links := &fakeLinks{}
	SignLocalFiles(fs, links)
	want := []*string{str("signed:a"), str("signed:up-b"), str("signed:c"), str("https://kept"), nil, nil}
	for i, f := range fs {
		if !reflect.DeepEqual(f.URL, want[i]) {
			t.Errorf("file %s: url %v, want %v", f.ID, f.URL, want[i])
		}
	}
	if links.now.IsZero() {
		t.Error("links were signed without a time")
	}
}

func TestDecodeObject(t *testing.T) {
	for text, want := range map[string]map[string]any{
		"":                  {},
		"null":              {},
		"[1,2]":             {},
		"{not json":         {},
		`"text"`:            {},
		`{}`:                {},
		`{"a":1,"b":["x"]}`: {"a": 1.0, "b": []any{"x"}},
	} {
		if got := DecodeObject(text); !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeObject(%q) = %v, want %v", text, got, want)
		}
	}
}
