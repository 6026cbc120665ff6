package handlers_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMessageLocalFileURL: GET /messages lists a local file of a message
// with a url, a signed preview link (as Dify's message files carry), which
// serves the bytes without a key; a tampered or unsigned link is refused.
func TestMessageLocalFileURL(t *testing.T) {
	s := newMediaServer(t, nil)
	png := []byte("\x89PNG\r\n\x1a\n fake image bytes")
	file := s.upload(t, s.mediaKey, "alice", "cat.png", "image/png", png)
	rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.mediaKey, body: `{"query":"what is this?","inputs":{},"user":"alice",
		"response_mode":"blocking","files":[{"type":"image","transfer_method":"local_file","upload_file_id":"` + file.ID + `"}]}`})
	expectStatus(t, rec, 200, "")
	var answer struct {
		ConversationID string `json:"conversation_id"`
	}
	kbDecode(t, rec, &answer)
	hist := s.do(t, request{method: "GET", key: s.mediaKey, path: "/v1/messages?user=alice&conversation_id=" + answer.ConversationID})
	expectStatus(t, hist, 200, "")
	var page struct {
		Data []struct {
			MessageFiles []struct {
				URL            *string `json:"url"`
				TransferMethod string  `json:"transfer_method"`
				UploadFileID   string  `json:"upload_file_id"`
			} `json:"message_files"`
		} `json:"data"`
	}
	kbDecode(t, hist, &page)
	if len(page.Data) != 1 || len(page.Data[0].MessageFiles) != 1 {
		t.Fatalf("history %s", hist.Body)
	}
	mf := page.Data[0].MessageFiles[0]
	if mf.URL == nil || !strings.HasPrefix(*mf.URL, "/files/"+file.ID+"/file-preview?") || !strings.Contains(*mf.URL, "sign=") {
		t.Fatalf("message file %+v", mf)
	}
	link := *mf.URL

	tests := []struct {
		name       string
		path       string
		wantStatus int
	}{
		{"the signed link serves the bytes", link, 200},
		{"a tampered signature is refused", strings.Replace(link, "sign=", "sign=x", 1), 403},
		{"another file under the same signature is refused", strings.Replace(link, file.ID, "00000000-0000-4000-8000-000000000000", 1), 403},
		{"no signature is refused", "/files/" + file.ID + "/file-preview", 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.raw(t, "GET", tc.path)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, rec.Body)
			}
			if tc.wantStatus == 200 {
				if rec.Body.String() != string(png) || rec.Header().Get("Content-Type") != "image/png" {
					t.Errorf("served %q as %q", rec.Body, rec.Header().Get("Content-Type"))
				}
				return
			}
			var e struct{ Code string }
			if json.Unmarshal(rec.Body.Bytes(), &e); e.Code != "forbidden" {
				t.Errorf("error body %s", rec.Body)
			}
		})
	}
}

// raw sends a request without a key to a path outside the API.
func (s *testServer) raw(t *testing.T, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}
