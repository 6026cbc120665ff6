package handlers_test

import (
	"strings"
	"testing"
)

// TestNULRefused checks that a NUL character (U+0000) anywhere a request
// carries text is refused with 400 invalid_param naming where it was, on
// SQLite as on PostgreSQL (which cannot store it and answered 500), and
// that the same text without it, or with a backslash that only looks like
// the escape, is served.
func TestNULRefused(t *testing.T) {
	s := newTestServer(t)
	unknown := "00000000-0000-4000-8000-00000000abcd"
	chat := func(body string) request {
		return request{method: "POST", path: "/v1/chat-messages", key: s.appKey, body: body}
	}
	upload, uploadType := multipartForm(t, userField("a\x00b"), fileField("note.txt", "text/plain", []byte("hi")))
	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantWhere  string // part of the message that names the place
	}{
		{"query", chat(`{"query":"hi\u0000","inputs":{},"user":"u","response_mode":"blocking"}`), 400, `field "query"`},
		{"user", chat(`{"query":"hi","inputs":{},"user":"u\u0000","response_mode":"blocking"}`), 400, `field "user"`},
		{"an input value", chat(`{"query":"hi","inputs":{"topic":"a\u0000b"},"user":"u","response_mode":"blocking"}`), 400, `field "inputs.topic"`},
		{"an input name", chat(`{"query":"hi","inputs":{"a\u0000":"b"},"user":"u","response_mode":"blocking"}`), 400, `field "inputs.a`},
		{"a file in a list", chat(`{"query":"hi","inputs":{},"user":"u","response_mode":"blocking","files":[{"type":"image","transfer_method":"remote_url","url":"http://x/\u0000"}]}`), 400, `field "files.0.url"`},
		{"an escaped backslash is text", chat(`{"query":"C:\\u0000 is a path","inputs":{},"user":"u","response_mode":"blocking"}`), 200, ""},
		{"query parameter", request{method: "GET", path: "/v1/conversations?user=a%00b", key: s.appKey}, 400, `query parameter "user"`},
		{"path parameter", request{method: "GET", path: "/v1/datasets/" + unknown + "/documents/a%00b", key: s.knowledgeKey}, 400, `path parameter "document_id"`},
		{"knowledge base name", request{method: "POST", path: "/v1/datasets", key: s.knowledgeKey, body: `{"name":"kb\u0000"}`}, 400, `field "name"`},
		{"upload form user", request{method: "POST", path: "/v1/files/upload", key: s.appKey, body: upload, contentType: uploadType}, 400, `form field "user"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, tc.req)
			if tc.wantStatus != 400 {
				expectStatus(t, rec, tc.wantStatus, "")
				return
			}
			expectStatus(t, rec, 400, "invalid_param")
			if !strings.Contains(rec.Body.String(), strings.ReplaceAll(tc.wantWhere, `"`, `\"`)) || !strings.Contains(rec.Body.String(), "NUL") {
				t.Errorf("message does not name %s and the NUL: %s", tc.wantWhere, rec.Body)
			}
		})
	}
}
