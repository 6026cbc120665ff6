package handlers_test

import (
	"encoding/json"
	"testing"
)

// TestDocumentUnderscoreAliases drives the four underscore spellings of the
// document operations, as the official Python SDK calls them, and checks
// each does what its hyphenated twin does.
func TestDocumentUnderscoreAliases(t *testing.T) {
	s := newTestServer(t)
	ds := kbCreate(t, s, `{"name":"aliases","indexing_technique":"economy"}`).ID
	base := "/v1/datasets/" + ds
	key := s.knowledgeKey

	created := func(t *testing.T, body []byte) docCreated {
		t.Helper()
		var out docCreated
		if err := json.Unmarshal(body, &out); err != nil || out.Document.ID == "" || out.Batch == "" {
			t.Fatalf("not a created document (%v): %s", err, body)
		}
		return out
	}

	rec := s.do(t, request{method: "POST", path: base + "/document/create_by_text", key: key,
		body: `{"name":"a.txt","text":"Cats purr.\n\nDogs bark.","process_rule":{"mode":"automatic"}}`})
	expectStatus(t, rec, 200, "")
	byText := created(t, rec.Body.Bytes())
	docWait(t, s, ds, byText.Batch)

	body, ct := multipartBody(t, "b.txt", []byte("Birds sing at dawn."), `{"process_rule":{"mode":"automatic"}}`)
	rec = s.do(t, request{method: "POST", path: base + "/document/create_by_file", key: key, body: body, contentType: ct})
	expectStatus(t, rec, 200, "")
	byFile := created(t, rec.Body.Bytes())
	docWait(t, s, ds, byFile.Batch)

	rec = s.do(t, request{method: "POST", path: base + "/documents/" + byText.Document.ID + "/update_by_text", key: key,
		body: `{"name":"a2.txt","text":"Fish swim."}`})
	expectStatus(t, rec, 200, "")
	if got := created(t, rec.Body.Bytes()); got.Document.ID != byText.Document.ID {
		t.Fatalf("update_by_text answered document %s, want %s", got.Document.ID, byText.Document.ID)
	}

	body, ct = multipartBody(t, "b2.txt", []byte("Owls hoot at night."), "")
	rec = s.do(t, request{method: "POST", path: base + "/documents/" + byFile.Document.ID + "/update_by_file", key: key, body: body, contentType: ct})
	expectStatus(t, rec, 200, "")
	if got := created(t, rec.Body.Bytes()); got.Document.ID != byFile.Document.ID {
		t.Fatalf("update_by_file answered document %s, want %s", got.Document.ID, byFile.Document.ID)
	}

	// Validation is the same as on the hyphenated path.
	expectStatus(t, s.do(t, request{method: "POST", path: base + "/document/create_by_text", key: key, body: `{"name":"x"}`}), 400, "invalid_param")
	expectStatus(t, s.do(t, request{method: "POST", path: base + "/document/create_by_text", key: s.appKey, body: `{"name":"x","text":"y"}`}), 401, "unauthorized")
}
