package conversations

import (
	"encoding/json"
	"time"
)

// PreviewLinks signs the preview link of an uploaded file, valid from now
// (files.PreviewSigner).
type PreviewLinks interface {
	URL(fileID string, now time.Time) string
}

// SignLocalFiles gives every local file of a message that has no url a
// signed preview link, as Dify lists a message's uploaded files. The link
// names the upload the file came from, or else the file itself.
func SignLocalFiles(fs []MessageFile, links PreviewLinks) {
	now := time.Now()
	for i := range fs {
		f := &fs[i]
		if f.TransferMethod != "local_file" || (f.URL != nil && *f.URL != "") {
			continue
		}
		id := f.ID
		if f.UploadFileID != nil && *f.UploadFileID != "" {
			id = *f.UploadFileID
		}
		link := links.URL(id, now)
		f.URL = &link
	}
}

// DecodeObject decodes a JSON object column, such as a conversation's
// inputs; anything else (empty, null, not an object) reads as {}.
func DecodeObject(text string) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal([]byte(text), &m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}
