package handlers_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// readerApp extracts the text of the files a run is given (sys.files).
const readerApp = `app: {mode: workflow, name: Reader}
kind: app
version: 0.3.0
workflow:
  features:
    file_upload:
      enabled: true
      allowed_file_types: [document]
      allowed_file_upload_methods: [local_file, remote_url]
      number_limits: 3
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: read
      data: {type: document-extractor, title: Read, variable_selector: [sys, files], is_array_file: true}
    - id: end
      data: {type: end, title: End, outputs: [{variable: text, value_selector: [read, text]}, {variable: name, value_selector: [sys, files, '0', name]}]}
    edges:
    - {source: start, sourceHandle: source, target: read}
    - {source: read, sourceHandle: source, target: end}
`

func TestWorkflowFilesReachSysFiles(t *testing.T) {
	s := newTestServer(t)
	_, key := s.importText(t, readerApp)
	body, ct := multipartForm(t, userField("ann"), fileField("notes.txt", "text/plain", []byte("Parcels leave at noon.")))
	rec := s.do(t, request{method: "POST", path: "/v1/files/upload", key: key, body: body, contentType: ct})
	expectStatus(t, rec, 201, "")
	var up struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &up); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, user, files string
		status            int
		code, want        string
	}{
		{"the owner's upload is read", "ann", `[{"type":"document","transfer_method":"local_file","upload_file_id":"` + up.ID + `"}]`, 200, "", "Parcels leave at noon."},
		{"another user's upload is not found", "bob", `[{"type":"document","transfer_method":"local_file","upload_file_id":"` + up.ID + `"}]`, 404, "file_not_found", ""},
		{"a kind the app does not take is refused", "ann", `[{"type":"image","transfer_method":"local_file","upload_file_id":"` + up.ID + `"}]`, 400, "invalid_param", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, request{method: "POST", path: "/v1/workflows/run", key: key,
				body: `{"inputs":{},"user":"` + tc.user + `","files":` + tc.files + `}`})
			expectStatus(t, rec, tc.status, tc.code)
			if tc.status != 200 {
				return
			}
			out := decode(t, rec)
			if at(out, "data", "status") != "succeeded" {
				t.Fatalf("run %v", out)
			}
			text := mustJSON(t, at(out, "data", "outputs", "text"))
			if !strings.Contains(text, tc.want) || at(out, "data", "outputs", "name") != "notes.txt" {
				t.Errorf("outputs %v", at(out, "data", "outputs"))
			}
		})
	}
}
