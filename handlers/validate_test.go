package handlers

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"appkb/apperr"
	"appkb/gen"
)

// FuzzNormalizeJSONBody feeds arbitrary bodies to the JSON clean-up that runs
// before validation: it must never panic, and must either refuse the body as
// invalid_param or leave behind valid JSON (or nothing).
func FuzzNormalizeJSONBody(f *testing.F) {
	spec, err := gen.GetSpec()
	if err != nil {
		f.Fatal(err)
	}
	op := spec.Paths.Find("/chat-messages").Post
	for _, seed := range []string{
		`{"query":"hi","inputs":{},"user":"u","files":null,"auto_generate_name":null}`,
		`null`, ``, `[1,null]`, `{"files":[{"url":null,"type":"image"}]}`, `{"inputs":{"a":null}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "/v1/chat-messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if err := normalizeJSONBody(req, op, 0); err != nil {
			if !apperr.Is(err, apperr.CodeInvalidParam) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		out, _ := io.ReadAll(req.Body)
		if len(out) > 0 && !json.Valid(out) {
			t.Fatalf("left invalid JSON %q for input %q", out, body)
		}
		if strings.Contains(string(out), `"auto_generate_name":null`) {
			t.Fatalf("null for the non-nullable optional field survived: %s", out)
		}
	})
}
