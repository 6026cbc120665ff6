package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"

	"appkb/internal/platform/blobs"
)

// TestAdminResetRemovesUploadBytes checks that a reset leaves no upload
// behind on disk: the files clients uploaded (to an app, and one more the
// reset must not miss) are in the data directory before and gone after,
// and their ids are unknown to a new app.
//
// readBlob (below) reads one stored blob whole.
func TestAdminResetRemovesUploadBytes(t *testing.T) {
	s := newAdminServer(t, false)
	dsl, err := os.ReadFile("../testdata/apps/chat.yml")
	if err != nil {
		t.Fatal(err)
	}
	importApp := func() string {
		rec := s.admin(t, "POST", "/apps", string(dsl), "application/octet-stream")
		expectStatus(t, rec, 201, "")
		var app struct {
			APIKey string `json:"api_key"`
		}
		decodeInto(t, rec, &app)
		return app.APIKey
	}
	key := importApp()
	// The data directory on SQLite, the blobs table on PostgreSQL.
	store := blobs.For(s.db, s.dataDir)
	tests := []struct {
		name, contentType string
		data              []byte
	}{
		{"notes.txt", "text/plain", []byte("bring the blue folder")},
		{"pixel.png", "image/png", []byte("\x89PNG\r\n\x1a\nfake")},
	}
	var paths []string
	var ids []string
	for _, tc := range tests {
		body, ct := multipartForm(t, userField("alice"), fileField(tc.name, tc.contentType, tc.data))
		rec := s.do(t, request{method: "POST", path: "/v1/files/upload", key: key, body: body, contentType: ct})
		expectStatus(t, rec, 201, "")
		var f struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &f); err != nil {
			t.Fatal(err)
		}
		p := "files/" + f.ID
		got, err := readBlob(store, p)
		if err != nil || string(got) != string(tc.data) {
			t.Fatalf("%s: the upload's bytes are not at %s: %q, %v", tc.name, p, got, err)
		}
		paths, ids = append(paths, p), append(ids, f.ID)
	}

	expectStatus(t, s.admin(t, "POST", "/reset", "", ""), 204, "")
	for _, p := range paths {
		if _, err := store.Stat(context.Background(), p); !errors.Is(err, blobs.ErrNotFound) {
			t.Errorf("after the reset %s is still there (%v)", p, err)
		}
	}
	// A new app cannot reach them either.
	key = importApp()
	for _, id := range ids {
		body := `{"inputs":{},"query":"hi","user":"alice","response_mode":"blocking","files":[{"type":"image","transfer_method":"local_file","upload_file_id":"` + id + `"}]}`
		rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key, body: body})
		if rec.Code < 400 {
			t.Errorf("a chat message with upload %s from before the reset: %d %s", id, rec.Code, rec.Body)
		}
	}
}

func readBlob(store blobs.Store, key string) ([]byte, error) {
	r, _, err := store.Open(context.Background(), key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
