package flows

import (
	"context"

	"appkb/internal/conversation/files"
	"appkb/internal/run/chat"
	"appkb/internal/run/workflow"
)

// AttachedFiles adapts the upload store to the chat runtime's files hook:
// it checks the files a message attaches and describes them as the message
// stores them.
func AttachedFiles(store *files.Store) func(ctx context.Context, appID, endUserID string, refs []chat.FileRef) ([]chat.ResolvedFile, error) {
	return func(ctx context.Context, appID, endUserID string, refs []chat.FileRef) ([]chat.ResolvedFile, error) {
		in := make([]files.Ref, len(refs))
		for i, r := range refs {
			in[i] = files.Ref{Type: r.Type, TransferMethod: r.TransferMethod, URL: r.URL, UploadFileID: r.UploadFileID}
		}
		resolved, err := store.Resolve(ctx, appID, endUserID, in)
		if err != nil {
			return nil, err
		}
		out := make([]chat.ResolvedFile, 0, len(resolved))
		for _, r := range resolved {
			out = append(out, chat.ResolvedFile{
				ID:             r.File.ID,
				Filename:       r.File.Name,
				Type:           r.Type,
				URL:            r.RemoteURL,
				MimeType:       r.File.MimeType,
				Size:           r.File.Size,
				TransferMethod: r.TransferMethod,
				BelongsTo:      "user",
				UploadFileID:   r.File.ID,
			})
		}
		return out, nil
	}
}

// WorkflowFiles describes attached files as workflow file values, the
// elements of sys.files.
func WorkflowFiles(in []chat.ResolvedFile) []workflow.File {
	out := make([]workflow.File, 0, len(in))
	for _, f := range in {
		out = append(out, workflow.File{
			Identity: workflow.FileIdentity, ID: f.ID, Type: f.Type, TransferMethod: f.TransferMethod,
			RemoteURL: f.URL, RelatedID: f.UploadFileID, Filename: f.Filename,
			Extension: dotted(files.Extension(f.Filename)), MimeType: f.MimeType, Size: f.Size,
		})
	}
	return out
}

// dotted gives an extension with its leading dot, as file values carry it.
func dotted(ext string) string {
	if ext == "" {
		return ""
	}
	return "." + ext
}
