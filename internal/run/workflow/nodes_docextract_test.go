package workflow

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/conversation/endusers"
	"appkb/internal/conversation/files"
)

// uploadFixture is a file store over a temporary database, with one app
// and one end user to own the uploads.
type uploadFixture struct {
	store           *files.Store
	appID, other    string
	user, otherUser string
}

const docApp = `version: 0.3.0
kind: app
app: {name: doc test, mode: workflow}
workflow:
  graph: {nodes: [{id: start, data: {type: start, title: Start, variables: []}}], edges: []}
`

func newUploadFixture(t *testing.T) *uploadFixture {
	t.Helper()
	gdb := db.OpenTemp(t)
	ctx := context.Background()
	f := &uploadFixture{store: files.NewStore(gdb, t.TempDir())}
	for _, id := range []*string{&f.appID, &f.other} {
		app, err := apps.NewStore(gdb).Import(ctx, []byte(docApp))
		if err != nil {
			t.Fatal(err)
		}
		*id = app.ID
	}
	for _, u := range []struct {
		id  *string
		app string
	}{{&f.user, f.appID}, {&f.otherUser, f.other}} {
		eu, err := endusers.NewStore(gdb).Resolve(ctx, u.app, "alice")
		if err != nil {
			t.Fatal(err)
		}
		*u.id = eu.ID
	}
	return f
}

// upload stores a file of the fixture's app and gives it as a file value.
func (f *uploadFixture) upload(t *testing.T, name, mimeType, content string) File {
	t.Helper()
	row, err := f.store.Save(context.Background(), files.Rules{}, f.appID, f.user, name, mimeType, strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	return File{Identity: FileIdentity, Type: "document", TransferMethod: "local_file", RelatedID: row.ID,
		Filename: row.Name, Extension: "." + row.Extension, MimeType: row.MimeType, Size: row.Size}
}

// docGraph is start (with a file input f and a file-list input fs) →
// document-extractor x reading sel → end showing x.text.
func docGraph(sel string) string {
	return `graph:
 nodes:
  - id: start
    data: {type: start, title: Start, variables: [{variable: f, type: file, required: false}, {variable: fs, type: file-list, required: false}, {variable: q, type: text-input, required: false}]}
  - id: x
    data: {type: document-extractor, title: Extract, variable_selector: ` + sel + `, is_array_file: false}
  - id: end
    data: {type: end, title: End, outputs: [{variable: text, value_selector: [x, text]}]}
 edges:` + edge("start", "source", "x") + edge("x", "source", "end")
}

func TestDocumentExtractor(t *testing.T) {
	fx := newUploadFixture(t)
	txt := fx.upload(t, "notes.txt", "text/plain", "plain words\r\nsecond line\n")
	md := fx.upload(t, "Guide.MD", "text/markdown", "# Guide\n\nSome *markdown*.")
	csv := fx.upload(t, "people.csv", "text/csv", "name,age\nAnn,7\nBob,9\n")
	yml := fx.upload(t, "conf.yaml", "application/yaml", "a: 1\n")
	exe := fx.upload(t, "tool.xyz", "application/octet-stream", "MZ")
	foreign, err := fx.store.Save(context.Background(), files.Rules{}, fx.other, fx.otherUser, "x.txt", "text/plain", strings.NewReader("theirs"))
	if err != nil {
		t.Fatal(err)
	}
	foreignFile := File{Identity: FileIdentity, TransferMethod: "local_file", RelatedID: foreign.ID, Filename: "x.txt"}

	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/report.html":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><body><h1>Report</h1><p>All good.</p></body></html>")
		case "/download":
			w.Header().Set("Content-Type", "text/csv")
			fmt.Fprint(w, "k,v\na,1\n")
		case "/big.txt":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(strings.Repeat("x", 16<<20)))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(site.Close)
	remote := func(path, name string) File {
		return File{Identity: FileIdentity, Type: "document", TransferMethod: "remote_url", RemoteURL: site.URL + path, Filename: name}
	}
	withStore := &Engine{Files: fx.store}
	guarded := localEngine()

	tests := []struct {
		name       string
		engine     *Engine
		sel        string
		inputs     map[string]any
		appID      string
		wantStatus string
		want       any
		wantErr    string
	}{
		{name: "a text file", engine: withStore, sel: "[start, f]", inputs: map[string]any{"f": txt},
			wantStatus: RunSucceeded, want: "plain words\nsecond line"},
		{name: "a markdown file with an upper-case extension", engine: withStore, sel: "[start, f]", inputs: map[string]any{"f": md},
			wantStatus: RunSucceeded, want: "# Guide\n\nSome *markdown*."},
		{name: "a csv file", engine: withStore, sel: "[start, f]", inputs: map[string]any{"f": csv},
			wantStatus: RunSucceeded, want: "name: Ann; age: 7\nname: Bob; age: 9"},
		{name: "a yaml file is read as text", engine: withStore, sel: "[start, f]", inputs: map[string]any{"f": yml},
			wantStatus: RunSucceeded, want: "a: 1"},
		{name: "a file list gives a list of texts", engine: withStore, sel: "[start, fs]",
			inputs: map[string]any{"fs": []any{txt, csv}}, wantStatus: RunSucceeded,
			want: []any{"plain words\nsecond line", "name: Ann; age: 7\nname: Bob; age: 9"}},
		{name: "an empty file list leaves the input unset", engine: withStore, sel: "[start, fs]",
			inputs: map[string]any{"fs": []any{}}, wantStatus: RunFailed, wantErr: "found no file in start.fs"},
		{name: "an empty list of files gives an empty list", engine: withStore, sel: "[sys, files]", inputs: map[string]any{},
			wantStatus: RunSucceeded, want: []any{}},
		{name: "without a file store uploads cannot be read", engine: &Engine{}, sel: "[start, f]", inputs: map[string]any{"f": txt},
			wantStatus: RunFailed, wantErr: `The file "notes.txt" cannot be read: this server keeps no uploaded files for workflows.`},
		{name: "an unsupported extension names the file and its type", engine: withStore, sel: "[start, f]", inputs: map[string]any{"f": exe},
			wantStatus: RunFailed, wantErr: `The file "tool.xyz" is of type .xyz, which the document extractor cannot read (it reads csv, docx`},
		{name: "an unknown upload", engine: withStore, sel: "[start, f]",
			inputs:     map[string]any{"f": File{Identity: FileIdentity, TransferMethod: "local_file", RelatedID: "0b7c2c6e-0000-4000-8000-000000000000", Filename: "gone.txt"}},
			wantStatus: RunFailed, wantErr: `The file "gone.txt" does not exist.`},
		{name: "a file of another app is refused", engine: withStore, sel: "[start, f]", inputs: map[string]any{"f": foreignFile},
			appID: "set", wantStatus: RunFailed, wantErr: `The file "x.txt" belongs to another app.`},
		{name: "a variable that is not a file", engine: withStore, sel: "[start, q]", inputs: map[string]any{"q": "text"},
			wantStatus: RunFailed, wantErr: "The variable start.q is a string, not a file."},
		{name: "a remote html page through the guard", engine: guarded, sel: "[start, f]",
			inputs: map[string]any{"f": remote("/report.html", "report.html")}, wantStatus: RunSucceeded, want: "Report\n\nAll good."},
		{name: "a remote file without a usable name is read by its type", engine: guarded, sel: "[start, f]",
			inputs: map[string]any{"f": remote("/download", "")}, wantStatus: RunSucceeded, want: "k: a; v: 1"},
		{name: "a remote file over the size limit", engine: guarded, sel: "[start, f]",
			inputs: map[string]any{"f": remote("/big.txt", "big.txt")}, wantStatus: RunFailed, wantErr: "the file is too large"},
		{name: "a remote file that is missing", engine: guarded, sel: "[start, f]",
			inputs: map[string]any{"f": remote("/nope.txt", "nope.txt")}, wantStatus: RunFailed, wantErr: "failed with HTTP status 404"},
		{name: "a remote loopback file is refused without an allowance", engine: &Engine{}, sel: "[start, f]",
			inputs: map[string]any{"f": remote("/report.html", "report.html")}, wantStatus: RunFailed, wantErr: "may not be fetched"},
		{name: "a remote file of an unsupported type is refused before fetching", engine: &Engine{}, sel: "[start, f]",
			inputs: map[string]any{"f": remote("/movie.mp4", "movie.mp4")}, wantStatus: RunFailed, wantErr: `The file "movie.mp4" is of type .mp4`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			appID := ""
			if tc.appID != "" {
				appID = fx.appID
			}
			res, rec := run1(t, tc.engine, RunInput{Workflow: graphYAML(t, docGraph(tc.sel)), Inputs: tc.inputs, AppID: appID})
			checkOrder(t, rec)
			if res.Status != tc.wantStatus {
				t.Fatalf("status %s (%q), want %s", res.Status, res.Error, tc.wantStatus)
			}
			if tc.wantErr != "" && !strings.Contains(res.Error, tc.wantErr) {
				t.Errorf("error\n got %q\nwant %q", res.Error, tc.wantErr)
			}
			if tc.want != nil {
				if got, want := fmt.Sprintf("%q", plain(res.Outputs["text"])), fmt.Sprintf("%q", tc.want); got != want {
					t.Errorf("text\n got %s\nwant %s", got, want)
				}
			}
		})
	}
}
