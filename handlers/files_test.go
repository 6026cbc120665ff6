package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
	"appkb/internal/llm"
	"appkb/internal/wiring"
)

// mediaApp is a chat app that takes images, documents and .dat files,
// transcribes speech and reads answers aloud, on the model provider
// "speechy" (which tests may point at a fake server).
const mediaApp = `version: 0.3.0
kind: app
app: {name: media test, mode: chat}
model_config:
  model: {provider: langgenius/speechy/speechy, name: chatty, mode: chat}
  speech_to_text: {enabled: true}
  text_to_speech: {enabled: true, voice: nova, language: en-US}
  file_upload:
    enabled: true
    allowed_file_types: [image, document, custom]
    allowed_file_extensions: [.dat]
    allowed_file_upload_methods: [local_file, remote_url]
    number_limits: 3
`

// imagesOnlyApp is a chat app whose upload settings take images only.
const imagesOnlyApp = `version: 0.3.0
kind: app
app: {name: images only, mode: chat}
model_config:
  model: {provider: langgenius/speechy/speechy, name: chatty, mode: chat}
  file_upload:
    enabled: true
    allowed_file_types: [image]
    allowed_file_upload_methods: [local_file]
    number_limits: 1
`

// mediaServer is the real server with a data directory, the demo apps and
// the media app, each with its key.
type mediaServer struct {
	*testServer
	mediaAppID, mediaKey string
}

func newMediaServer(t *testing.T, registry *llm.Registry, adjust ...func(*handlers.Deps)) *mediaServer {
	t.Helper()
	_, _, specYAML := loadContract(t)
	gdb := db.OpenTemp(t)
	ctx := context.Background()
	appStore, keyStore := apps.NewStore(gdb), apikeys.NewStore(gdb)
	dk, err := demo.Ensure(ctx, appStore, keyStore)
	if err != nil {
		t.Fatal(err)
	}
	app, err := appStore.Import(ctx, []byte(mediaApp))
	if err != nil {
		t.Fatal(err)
	}
	key, err := keyStore.CreateAppKey(ctx, app.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	deps := handlers.Deps{DB: gdb, Logger: log, SpecYAML: specYAML, Models: registry, DataDir: t.TempDir()}
	for _, f := range adjust {
		f(&deps)
	}
	e, err := wiring.NewServer(deps)
	if err != nil {
		t.Fatal(err)
	}
	return &mediaServer{
		testServer: &testServer{e: e, db: gdb, appID: dk.AppID, appKey: dk.AppKey, knowledgeKey: dk.KnowledgeKey},
		mediaAppID: app.ID, mediaKey: key,
	}
}

// formPart is one part of a multipart form.
type formPart struct {
	field string
	// filename is sent as the filename parameter unless noFilename is set.
	filename    string
	noFilename  bool
	contentType string // none when empty
	data        []byte
}

// multipartForm builds a multipart/form-data body and its content type.
func multipartForm(t *testing.T, parts ...formPart) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		disp := fmt.Sprintf(`form-data; name=%q`, p.field)
		if !p.noFilename {
			disp += fmt.Sprintf(`; filename=%q`, p.filename)
		}
		h.Set("Content-Disposition", disp)
		if p.contentType != "" {
			h.Set("Content-Type", p.contentType)
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write(p.data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String(), w.FormDataContentType()
}

func userField(name string) formPart {
	return formPart{field: "user", noFilename: true, data: []byte(name)}
}

func fileField(name, contentType string, data []byte) formPart {
	return formPart{field: "file", filename: name, contentType: contentType, data: data}
}

type uploaded struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Size       int     `json:"size"`
	Extension  string  `json:"extension"`
	MimeType   string  `json:"mime_type"`
	CreatedBy  string  `json:"created_by"`
	CreatedAt  int64   `json:"created_at"`
	PreviewURL *string `json:"preview_url"`
}

// upload sends one file as user and returns the stored file.
func (s *mediaServer) upload(t *testing.T, key, user, name, contentType string, data []byte) uploaded {
	t.Helper()
	body, ct := multipartForm(t, userField(user), fileField(name, contentType, data))
	rec := s.do(t, request{method: "POST", path: "/v1/files/upload", key: key, body: body, contentType: ct})
	if rec.Code != http.StatusCreated {
		t.Fatalf("upload: %d %s", rec.Code, rec.Body)
	}
	var out uploaded
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFileUpload(t *testing.T) {
	s := newMediaServer(t, nil)
	png := []byte("\x89PNG\r\n\x1a\nfake")
	// The image limit is 10 MB (the default system parameters); the exact
	// boundaries are tested in package files.
	tenMB := bytes.Repeat([]byte("x"), 10<<20)
	imagesOnly, err := apps.NewStore(s.db).Import(context.Background(), []byte(imagesOnlyApp))
	if err != nil {
		t.Fatal(err)
	}
	imagesOnlyKey, err := apikeys.NewStore(s.db).CreateAppKey(context.Background(), imagesOnly.ID, "")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		key        string // the media app's when empty
		parts      []formPart
		wantStatus int
		wantCode   string
		check      func(t *testing.T, got uploaded)
	}{
		{"image for a user → 201", "", []formPart{userField("alice"), fileField("cat.png", "image/png", png)}, 201, "", func(t *testing.T, got uploaded) {
			if got.Name != "cat.png" || got.Size != len(png) || got.Extension != "png" || got.MimeType != "image/png" || got.CreatedBy == "" || got.CreatedAt == 0 {
				t.Errorf("got %+v", got)
			}
			if got.PreviewURL == nil || *got.PreviewURL != "/v1/files/"+got.ID+"/preview" {
				t.Errorf("preview_url %v", got.PreviewURL)
			}
		}},
		{"the user field may come after the file", "", []formPart{fileField("notes.pdf", "application/pdf", []byte("%PDF")), userField("alice")}, 201, "", nil},
		{"octet-stream gets the type of the extension", "", []formPart{userField("alice"), fileField("notes.pdf", "application/octet-stream", []byte("%PDF"))}, 201, "", func(t *testing.T, got uploaded) {
			if got.MimeType != "application/pdf" {
				t.Errorf("mime_type %q", got.MimeType)
			}
		}},
		{"custom extension the app lists", "", []formPart{userField("alice"), fileField("blob.DAT", "application/octet-stream", []byte("??"))}, 201, "", nil},
		{"image over the image limit → 413", "", []formPart{userField("alice"), fileField("big.png", "image/png", append(tenMB, 'x'))}, 413, "file_too_large", nil},
		{"kind the app does not take is still stored", "", []formPart{userField("alice"), fileField("song.mp3", "audio/mpeg", []byte("ID3"))}, 201, "", nil},
		{"text file for an app that takes images only is stored", imagesOnlyKey, []formPart{userField("alice"), fileField("notes.txt", "text/plain", []byte("hi"))}, 201, "", nil},
		{"extension the app does not list is stored", "", []formPart{userField("alice"), fileField("data.xyz", "application/octet-stream", []byte("??"))}, 201, "", nil},
		{"blocked extension → 400", "", []formPart{userField("alice"), fileField("tool.exe", "application/octet-stream", []byte("MZ"))}, 400, "file_extension_blocked", nil},
		{"blocked extension in upper case → 400", "", []formPart{userField("alice"), fileField("RUN.BAT", "application/octet-stream", []byte("@echo"))}, 400, "file_extension_blocked", nil},
		{"file part without a Content-Type → 415", "", []formPart{userField("alice"), fileField("cat.png", "", png)}, 415, "unsupported_file_type", nil},
		{"empty file name → 400", "", []formPart{userField("alice"), fileField("", "image/png", png)}, 400, "filename_not_exists_error", nil},
		{"file field without a file name → 400", "", []formPart{userField("alice"), {field: "file", noFilename: true, data: png}}, 400, "filename_not_exists_error", nil},
		{"two files → 400", "", []formPart{userField("alice"), fileField("a.png", "image/png", png), fileField("b.png", "image/png", png)}, 400, "too_many_files", nil},
		{"two files where the first is refused → 400", "", []formPart{fileField("tool.exe", "application/octet-stream", []byte("MZ")), fileField("b.png", "image/png", png)}, 400, "too_many_files", nil},
		{"file name with a path → 400", "", []formPart{userField("alice"), fileField("../../etc/passwd.png", "image/png", png)}, 400, "invalid_param", nil},
		{"no user: the default user owns it", "", []formPart{fileField("cat.png", "image/png", png)}, 201, "", nil},
		{"an app without upload settings takes any kind", s.appKey, []formPart{userField("alice"), fileField("song.mp3", "audio/mpeg", []byte("ID3"))}, 201, "", nil},
		{"knowledge key → 401", s.knowledgeKey, []formPart{fileField("cat.png", "image/png", png)}, 401, "unauthorized", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key
			if key == "" {
				key = s.mediaKey
			}
			body, ct := multipartForm(t, tc.parts...)
			rec := s.do(t, request{method: "POST", path: "/v1/files/upload", key: key, body: body, contentType: ct})
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, truncate(rec.Body.String()))
			}
			if tc.wantCode != "" {
				if got := errorCode(t, rec); got != tc.wantCode {
					t.Errorf("code %q, want %q: %s", got, tc.wantCode, truncate(rec.Body.String()))
				}
				return
			}
			if tc.check != nil {
				var got uploaded
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
					t.Fatal(err)
				}
				tc.check(t, got)
			}
		})
	}
}

// doPreview is do for the file preview. openapi.yaml describes the inline
// preview as sent with the file's own type but declares only
// application/octet-stream for it; until the 200 response also lists
// '*/*', an inline answer is checked as if it were sent as
// application/octet-stream (everything else about it is still checked).
func (s *mediaServer) doPreview(t *testing.T, r request) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, r.build())
	checked := rec
	if ct := rec.Header().Get("Content-Type"); rec.Code == http.StatusOK && ct != "application/octet-stream" && !previewDeclaresAnyType(t) {
		checked = httptest.NewRecorder()
		for k, v := range rec.Header() {
			checked.Header()[k] = v
		}
		checked.Header().Set("Content-Type", "application/octet-stream")
		checked.WriteHeader(rec.Code)
		checked.Body.Write(rec.Body.Bytes())
	}
	checkResponse(t, r, checked)
	return rec
}

func previewDeclaresAnyType(t *testing.T) bool {
	doc, _, _ := loadContract(t)
	item := doc.Paths.Find("/files/{file_id}/preview")
	if item == nil || item.Get == nil {
		return false
	}
	ok := item.Get.Responses.Status(http.StatusOK)
	return ok != nil && ok.Value != nil && ok.Value.Content["*/*"] != nil
}

func TestFilePreview(t *testing.T) {
	s := newMediaServer(t, nil)
	png := []byte("\x89PNG\r\n\x1a\nfake")
	alices := s.upload(t, s.mediaKey, "alice", "cat picture.png", "image/png", png)
	doc := s.upload(t, s.mediaKey, "alice", "Ünïcode.pdf", "application/octet-stream", []byte("%PDF"))
	other := s.upload(t, s.appKey, "alice", "other.png", "image/png", png) // the demo app's

	preview := func(id, query string) string { return "/v1/files/" + id + "/preview" + query }
	tests := []struct {
		name        string
		key         string // the media app's when empty
		path        string
		wantStatus  int
		wantCode    string
		wantType    string
		disposition string
	}{
		{"the owner, inline", "", preview(alices.ID, "?user=alice"), 200, "", "image/png", `inline; filename="cat picture.png"`},
		{"as an attachment", "", preview(alices.ID, "?user=alice&as_attachment=true"), 200, "", "application/octet-stream", `attachment; filename="cat picture.png"`},
		{"a non-ASCII name is encoded", "", preview(doc.ID, "?as_attachment=true"), 200, "", "application/octet-stream", `attachment; filename*=utf-8''%C3%9Cn%C3%AFcode.pdf`},
		{"without a user, any file of the app", "", preview(alices.ID, ""), 200, "", "image/png", ""},
		{"another end user → 403", "", preview(alices.ID, "?user=bob"), 403, "file_access_denied", "", ""},
		{"a file of another app → 403", "", preview(other.ID, "?user=alice"), 403, "file_access_denied", "", ""},
		{"the other app may read its own file", s.appKey, preview(other.ID, "?user=alice"), 200, "", "image/png", ""},
		{"unknown file → 404", "", preview("3f8c1c9e-0000-4000-8000-000000000000", "?user=alice"), 404, "file_not_found", "", ""},
		{"id that is not a uuid → 404", "", preview("cat.png", ""), 404, "file_not_found", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key
			if key == "" {
				key = s.mediaKey
			}
			rec := s.doPreview(t, request{method: "GET", path: tc.path, key: key})
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, truncate(rec.Body.String()))
			}
			if tc.wantCode != "" {
				if got := errorCode(t, rec); got != tc.wantCode {
					t.Errorf("code %q, want %q", got, tc.wantCode)
				}
				return
			}
			h := rec.Header()
			if got := h.Get("Content-Type"); got != tc.wantType {
				t.Errorf("Content-Type %q, want %q", got, tc.wantType)
			}
			if tc.disposition != "" && h.Get("Content-Disposition") != tc.disposition {
				t.Errorf("Content-Disposition %q, want %q", h.Get("Content-Disposition"), tc.disposition)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
				t.Errorf("missing protective headers: %v", h)
			}
			if h.Get("Content-Length") != fmt.Sprint(rec.Body.Len()) {
				t.Errorf("Content-Length %q for %d bytes", h.Get("Content-Length"), rec.Body.Len())
			}
		})
	}
}

// TestFormWithoutBoundary sends the file operations a body declared as a
// multipart form but without the boundary that splits it: the form cannot
// be opened, which is the client's mistake (it was a 500).
func TestFormWithoutBoundary(t *testing.T) {
	s := newTestServer(t)
	unknown := "00000000-0000-4000-8000-00000000abcd"
	tests := []struct {
		name, method, path, key string
	}{
		{"upload", "POST", "/v1/files/upload", s.appKey},
		{"speech to text", "POST", "/v1/audio-to-text", s.appKey},
		{"document from a file", "POST", "/v1/datasets/" + unknown + "/document/create-by-file", s.knowledgeKey},
		{"document replaced by a file", "POST", "/v1/datasets/" + unknown + "/documents/" + unknown + "/update-by-file", s.knowledgeKey},
		{"pipeline upload", "POST", "/v1/datasets/pipeline/file-upload", s.knowledgeKey},
	}
	for _, tc := range tests {
		for _, ct := range []string{"multipart/form-data", "multipart/form-data; boundary="} {
			t.Run(tc.name+" "+ct, func(t *testing.T) {
				rec := s.do(t, request{method: tc.method, path: tc.path, key: tc.key, body: "not a form", contentType: ct})
				expectStatus(t, rec, 400, "invalid_param")
			})
		}
	}
}
