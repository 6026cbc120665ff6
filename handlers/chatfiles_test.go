package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"appkb/handlers"
)

// TestChatMessageFiles checks that uploads can be attached to chat messages
// by their owner only, and that history shows them.
func TestChatMessageFiles(t *testing.T) {
	s := newMediaServer(t, nil)
	png := []byte("\x89PNG\r\n\x1a\n fake image bytes")
	file := s.upload(t, s.mediaKey, "alice", "cat.png", "image/png", png)

	message := func(user string) string {
		return fmt.Sprintf(`{"query":"what is in the picture?","inputs":{},"user":%q,"response_mode":"blocking",
			"files":[{"type":"image","transfer_method":"local_file","upload_file_id":%q}]}`, user, file.ID)
	}
	tests := []struct {
		name       string
		user       string
		wantStatus int
		wantCode   string
	}{
		{"the uploader attaches the file", "alice", 200, ""},
		{"another user cannot attach it", "bob", 404, "file_not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.mediaKey, body: message(tc.user)})
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
			if tc.wantStatus != 200 {
				return
			}
			var answer struct {
				ConversationID string `json:"conversation_id"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
				t.Fatal(err)
			}
			hist := s.do(t, request{method: "GET", key: s.mediaKey,
				path: "/v1/messages?user=" + tc.user + "&conversation_id=" + answer.ConversationID})
			expectStatus(t, hist, 200, "")
			if !strings.Contains(hist.Body.String(), `"upload_file_id":"`+file.ID+`"`) {
				t.Errorf("history does not show the attached file: %s", hist.Body)
			}
		})
	}
}

// TestChatMessageRemoteFiles checks the remote-fetch guard on files that
// messages attach by URL: a loopback server is refused unless the
// allowlist names it.
func TestChatMessageRemoteFiles(t *testing.T) {
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n remote image"))
	}))
	defer img.Close()
	body := fmt.Sprintf(`{"query":"describe it","inputs":{},"user":"alice","response_mode":"blocking",
		"files":[{"type":"image","transfer_method":"remote_url","url":%q}]}`, img.URL+"/cat.png")

	tests := []struct {
		name       string
		allow      []netip.Prefix
		wantStatus int
		wantCode   string
	}{
		{"loopback is refused by default", nil, 400, "invalid_param"},
		{"the allowlist lets it through", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newMediaServer(t, nil, func(d *handlers.Deps) { d.FetchAllow = tc.allow })
			rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.mediaKey, body: body})
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
		})
	}
}

// TestUploadTakesAnyKindAttachChecks checks where the app's file settings
// apply: an upload of a kind the app does not take is stored, and refused
// only when a message attaches it.
func TestUploadTakesAnyKindAttachChecks(t *testing.T) {
	s := newMediaServer(t, nil)
	song := s.upload(t, s.mediaKey, "alice", "song.mp3", "audio/mpeg", []byte("ID3 fake"))
	notes := s.upload(t, s.mediaKey, "alice", "notes.txt", "text/plain", []byte("plain words"))
	tests := []struct {
		name, files string
		wantStatus  int
		wantCode    string
	}{
		{"audio the app does not take → 400", `[{"type":"audio","transfer_method":"local_file","upload_file_id":"` + song.ID + `"}]`, 400, "invalid_param"},
		{"the same file passed off as custom → 400", `[{"type":"custom","transfer_method":"local_file","upload_file_id":"` + song.ID + `"}]`, 400, "invalid_param"},
		{"more files than the app's limit → 400", `[` + strings.Repeat(`{"type":"document","transfer_method":"local_file","upload_file_id":"`+notes.ID+`"},`, 3) +
			`{"type":"document","transfer_method":"local_file","upload_file_id":"` + notes.ID + `"}]`, 400, "invalid_param"},
		{"a document the app takes", `[{"type":"document","transfer_method":"local_file","upload_file_id":"` + notes.ID + `"}]`, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"query":"read this","inputs":{},"user":"alice","response_mode":"blocking","files":` + tc.files + `}`
			rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.mediaKey, body: body})
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
		})
	}
}
