package handlers_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
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
