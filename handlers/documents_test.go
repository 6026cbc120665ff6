package handlers_test

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

// docWait polls the indexing-status operation until every document of the
// batch is completed or failed.
func docWait(t *testing.T, s *testServer, ds, batch string) {
	t.Helper()
	for range 300 {
		rec := s.do(t, request{method: "GET", path: "/v1/datasets/" + ds + "/documents/" + batch + "/indexing-status", key: s.knowledgeKey})
		expectStatus(t, rec, 200, "")
		var st struct {
			Data []struct {
				IndexingStatus string `json:"indexing_status"`
			} `json:"data"`
		}
		kbDecode(t, rec, &st)
		done := true
		for _, d := range st.Data {
			if d.IndexingStatus != "completed" && d.IndexingStatus != "error" {
				done = false
			}
		}
		if done {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("indexing did not finish")
}

type docCreated struct {
	Document struct {
		ID            string `json:"id"`
		DisplayStatus string `json:"display_status"`
		DocForm       string `json:"doc_form"`
	} `json:"document"`
	Batch string `json:"batch"`
}

func multipartBody(t *testing.T, name string, data []byte, settings string) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	fw, err := w.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	if settings != "" {
		w.WriteField("data", settings)
	}
	w.Close()
	return buf.String(), w.FormDataContentType()
}

func TestDocumentsAndChunksAPI(t *testing.T) {
	s := newTestServer(t)
	ds := kbCreate(t, s, `{"name":"docs"}`).ID
	base := "/v1/datasets/" + ds
	key := s.knowledgeKey
	call := func(method, path, body string) *httptest.ResponseRecorder {
		return s.do(t, request{method: method, path: base + path, key: key, body: body})
	}

	// The first document must choose the indexing technique.
	expectStatus(t, call("POST", "/document/create-by-text", `{"name":"a","text":"x"}`), 400, "invalid_param")

	rec := call("POST", "/document/create-by-text", `{"name":"notes","text":"Cats purr.\n\nDogs bark loudly.\nBirds sing.",
		"indexing_technique":"high_quality","process_rule":{"mode":"hierarchical","rules":{"parent_mode":"paragraph"}}}`)
	expectStatus(t, rec, 200, "")
	var text docCreated
	kbDecode(t, rec, &text)
	if text.Document.DocForm != "hierarchical_model" {
		t.Fatalf("doc_form = %s", text.Document.DocForm)
	}
	docWait(t, s, ds, text.Batch)
	doc := "/documents/" + text.Document.ID

	// A file upload, an unsupported type and a bad batch.
	body, ct := multipartBody(t, "sample.md", mustRead(t, "../internal/platform/docparse/testdata/sample.md"), `{"doc_form":"hierarchical_model"}`)
	rec = s.do(t, request{method: "POST", path: base + "/document/create-by-file", key: key, body: body, contentType: ct})
	expectStatus(t, rec, 200, "")
	var file docCreated
	kbDecode(t, rec, &file)
	docWait(t, s, ds, file.Batch)
	body, ct = multipartBody(t, "virus.exe", []byte("MZ"), "")
	rec = s.do(t, request{method: "POST", path: base + "/document/create-by-file", key: key, body: body, contentType: ct})
	expectStatus(t, rec, 415, "unsupported_file_type")
	expectStatus(t, call("GET", "/documents/nope/indexing-status", ""), 404, "not_found")

	// Lists, details and the metadata variants.
	rec = call("GET", "/documents?status=available&keyword=note", "")
	expectStatus(t, rec, 200, "")
	var list struct {
		Total int `json:"total"`
	}
	kbDecode(t, rec, &list)
	if list.Total != 1 {
		t.Fatalf("available documents named like note = %d, want 1", list.Total)
	}
	for _, m := range []string{"all", "only", "without"} {
		expectStatus(t, call("GET", doc+"?metadata="+m, ""), 200, "")
	}
	rec = s.do(t, request{method: "GET", path: "/v1/datasets/" + ds, key: key})
	var dsView struct {
		DocumentCount int `json:"document_count"`
		WordCount     int `json:"word_count"`
	}
	kbDecode(t, rec, &dsView)
	if dsView.DocumentCount != 2 || dsView.WordCount == 0 {
		t.Fatalf("knowledge base counts = %+v", dsView)
	}

	// Chunks and child chunks.
	rec = call("GET", doc+"/segments", "")
	expectStatus(t, rec, 200, "")
	var segs struct {
		Data []struct {
			ID          string `json:"id"`
			ChildChunks []struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			} `json:"child_chunks"`
		} `json:"data"`
		Total int `json:"total"`
	}
	kbDecode(t, rec, &segs)
	if segs.Total != 2 || len(segs.Data[1].ChildChunks) != 2 || segs.Data[1].ChildChunks[0].Type != "automatic" {
		t.Fatalf("segments = %+v", segs)
	}
	seg := doc + "/segments/" + segs.Data[0].ID
	expectStatus(t, call("POST", doc+"/segments", `{"segments":[{"content":"Fish swim.","keywords":["fish"]}]}`), 200, "")
	expectStatus(t, call("GET", seg, ""), 200, "")
	expectStatus(t, call("POST", seg, `{"segment":{"content":"Cats purr softly."}}`), 200, "")
	rec = call("POST", seg+"/child_chunks", `{"content":"extra child"}`)
	expectStatus(t, rec, 200, "")
	var child struct {
		Data struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"data"`
	}
	kbDecode(t, rec, &child)
	if child.Data.Type != "customized" {
		t.Fatalf("child type = %s", child.Data.Type)
	}
	expectStatus(t, call("GET", seg+"/child_chunks?page=1&limit=1", ""), 200, "")
	expectStatus(t, call("PATCH", seg+"/child_chunks/"+child.Data.ID, `{"content":"changed"}`), 200, "")
	expectStatus(t, s.do(t, request{method: "DELETE", path: base + seg + "/child_chunks/" + child.Data.ID, key: key}), 204, "")
	expectStatus(t, s.do(t, request{method: "DELETE", path: base + seg, key: key}), 204, "")

	// Update by text re-indexes under a new batch.
	rec = call("POST", doc+"/update-by-text", `{"name":"notes 2","text":"New text.\n\nMore."}`)
	expectStatus(t, rec, 200, "")
	var upd docCreated
	kbDecode(t, rec, &upd)
	docWait(t, s, ds, upd.Batch)

	// Download link and zip.
	rec = call("GET", "/documents/"+file.Document.ID+"/download", "")
	expectStatus(t, rec, 200, "")
	var link struct{ URL string }
	kbDecode(t, rec, &link)
	original := mustRead(t, "../internal/platform/docparse/testdata/sample.md")
	got := httptest.NewRecorder()
	s.e.ServeHTTP(got, httptest.NewRequest("GET", link.URL, nil))
	if got.Code != 200 || !bytes.Equal(got.Body.Bytes(), original) {
		t.Fatalf("download link answered %d with %d bytes, want the %d uploaded", got.Code, got.Body.Len(), len(original))
	}
	if cl := got.Header().Get("Content-Length"); cl != fmt.Sprint(len(original)) {
		t.Errorf("Content-Length = %q, want %d", cl, len(original))
	}
	ranged := httptest.NewRequest("GET", link.URL, nil)
	ranged.Header.Set("Range", "bytes=2-5")
	got = httptest.NewRecorder()
	s.e.ServeHTTP(got, ranged)
	if got.Code != 206 || !bytes.Equal(got.Body.Bytes(), original[2:6]) {
		t.Fatalf("range request answered %d %q", got.Code, got.Body.Bytes())
	}
	expectStatus(t, call("POST", "/documents/download-zip", fmt.Sprintf(`{"document_ids":[%q]}`, file.Document.ID)), 200, "")

	// Metadata values.
	rec = call("POST", "/metadata", `{"type":"string","name":"author"}`)
	var field struct{ ID string }
	kbDecode(t, rec, &field)
	expectStatus(t, call("POST", "/documents/metadata", fmt.Sprintf(`{"operation_data":[{"document_id":%q,"metadata_list":[{"id":%q,"name":"author","value":"Ann"}]}]}`,
		text.Document.ID, field.ID)), 200, "")

	// Status actions, archived immutability, scoped keys.
	expectStatus(t, call("PATCH", "/documents/status/archive", fmt.Sprintf(`{"document_ids":[%q]}`, file.Document.ID)), 200, "")
	expectStatus(t, s.do(t, request{method: "DELETE", path: base + "/documents/" + file.Document.ID, key: key}), 403, "archived_document_immutable")
	other := kbScopedKey(t, s, kbCreate(t, s, `{"name":"other"}`).ID)
	expectStatus(t, s.do(t, request{method: "GET", path: base + "/documents", key: other}), 403, "forbidden")
	expectStatus(t, s.do(t, request{method: "GET", path: base + doc + "/segments", key: other}), 403, "forbidden")
	expectStatus(t, s.do(t, request{method: "DELETE", path: base + doc, key: other}), 403, "forbidden")
	expectStatus(t, s.do(t, request{method: "DELETE", path: base + doc, key: key}), 204, "")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
