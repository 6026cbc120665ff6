package validation

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"appkb/gen"
	"appkb/internal/platform/apperr"
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
		if _, err := normalizeJSONBody(req, op, 0); err != nil {
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

// TestJSONBodyDecodedOnce checks the JSON body path that replaces
// kin-openapi's own decoding: what the handler reads afterwards, and which
// bodies are refused.
func TestJSONBodyDecodedOnce(t *testing.T) {
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	router, err := legacy.NewRouter(spec)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		body     string
		wantErr  string // part of the error message; "" for none
		wantBody map[string]string
	}{
		{name: "numbers keep their digits", body: `{"query":"q","user":"u","inputs":{"n":12345678901234567890},"auto_generate_name":false}`,
			wantBody: map[string]string{"inputs": `{"n":12345678901234567890}`, "auto_generate_name": "false"}},
		{name: "a default is written back", body: `{"query":"q","user":"u","inputs":{}}`,
			wantBody: map[string]string{"auto_generate_name": "true"}},
		{name: "a null for a plain optional field is dropped", body: `{"query":"q","user":"u","inputs":{},"auto_generate_name":null}`,
			wantBody: map[string]string{"auto_generate_name": "true"}},
		{name: "a nullable field keeps its null", body: `{"query":"q","user":"u","inputs":{},"conversation_id":null,"auto_generate_name":false}`,
			wantBody: map[string]string{"conversation_id": "null"}},
		{name: "data after the value", body: `{"query":"q","user":"u","inputs":{}} {}`, wantErr: "not valid JSON"},
		{name: "wrong type", body: `{"query":1,"user":"u","inputs":{}}`, wantErr: `field "query"`},
		{name: "missing required field", body: `{"query":"q","inputs":{}}`, wantErr: "user"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/v1/chat-messages", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := normalizeJSONBody(req, route.Operation, 0)
			if err == nil {
				if body == nil {
					t.Fatal("no decoded body for a JSON operation")
				}
				input := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route}
				if err = validateJSONBody(input, body); err != nil {
					err = validationError(err)
				}
			}
			if tc.wantErr != "" {
				if err == nil || !apperr.Is(err, apperr.CodeInvalidParam) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want invalid_param mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]json.RawMessage
			raw, _ := io.ReadAll(req.Body)
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("handler body %q: %v", raw, err)
			}
			for k, want := range tc.wantBody {
				if string(got[k]) != want {
					t.Errorf("%s = %s, want %s (body %s)", k, got[k], want, raw)
				}
			}
		})
	}
}
