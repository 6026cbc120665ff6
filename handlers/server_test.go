package handlers_test

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"appkb/internal/apps/apikeys"
)

const (
	datasetA = "0b6a1f0e-5d1c-4a43-9a4e-3a0a7f4f1a01"
	datasetB = "0b6a1f0e-5d1c-4a43-9a4e-3a0a7f4f1a02"
	convID   = "5f0c3e52-8b6f-4bd0-9d0a-0c7b1f4e2a10"
)

const chatBody = `{"query":"hello","inputs":{},"user":"u1"}`

func TestAuthentication(t *testing.T) {
	s := newTestServer(t)
	store := apikeys.NewStore(s.db)
	ctx := context.Background()
	scoped, err := store.CreateKnowledgeKey(ctx, []string{datasetA}, "")
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := store.CreateAppKey(ctx, s.appID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Revoke(ctx, revoked); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
	}{
		{"no Authorization header → 401", request{method: "GET", path: "/v1/info"}, 401, "unauthorized"},
		{"Basic instead of Bearer → 401", request{method: "GET", path: "/v1/info",
			header: http.Header{"Authorization": {"Basic " + s.appKey}}}, 401, "unauthorized"},
		{"Bearer without a key → 401", request{method: "GET", path: "/v1/info",
			header: http.Header{"Authorization": {"Bearer "}}}, 401, "unauthorized"},
		{"unknown app key → 401", request{method: "GET", path: "/v1/info", key: "app-doesnotexist0000000000000"}, 401, "unauthorized"},
		{"key without a known prefix → 401", request{method: "GET", path: "/v1/info", key: "sk-1234"}, 401, "unauthorized"},
		{"revoked key → 401", request{method: "GET", path: "/v1/info", key: revoked}, 401, "unauthorized"},
		{"knowledge key on an app operation → 401", request{method: "GET", path: "/v1/info", key: s.knowledgeKey}, 401, "unauthorized"},
		{"app key on a knowledge operation → 401", request{method: "GET", path: "/v1/datasets", key: s.appKey}, 401, "unauthorized"},
		{"scoped knowledge key outside its scope → 403", request{method: "GET", path: "/v1/datasets/" + datasetB, key: scoped}, 403, "forbidden"},
		{"auth is checked before validation", request{method: "POST", path: "/v1/chat-messages", body: `{}`}, 401, "unauthorized"},
		{"app key on an app operation → 200", request{method: "GET", path: "/v1/info", key: s.appKey}, 200, ""},
		{"lower-case bearer scheme is accepted", request{method: "GET", path: "/v1/info",
			header: http.Header{"Authorization": {"bearer " + s.appKey}}}, 200, ""},
		// Neither knowledge base exists; reaching the handler (404) shows that
		// authentication let the key through.
		{"scoped knowledge key inside its scope passes", request{method: "GET", path: "/v1/datasets/" + datasetA, key: scoped}, 404, "not_found"},
		{"workspace knowledge key passes", request{method: "GET", path: "/v1/datasets/" + datasetB, key: s.knowledgeKey}, 404, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expectStatus(t, s.do(t, tc.req), tc.wantStatus, tc.wantCode)
		})
	}
}

func TestRequestValidation(t *testing.T) {
	s := newTestServer(t)
	upload := func(withFile bool) (string, string) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		_ = w.WriteField("user", "u1")
		if withFile {
			fw, _ := w.CreateFormFile("file", "a.txt")
			_, _ = fw.Write([]byte("hello"))
		}
		_ = w.Close()
		return buf.String(), w.FormDataContentType()
	}
	noFile, noFileCT := upload(false)
	withFile, withFileCT := upload(true)

	tests := []struct {
		name        string
		req         request
		wantStatus  int
		wantCode    string
		wantMessage string // a part of the message, naming the field
	}{
		{"missing required body field", request{method: "POST", path: "/v1/chat-messages",
			body: `{"inputs":{},"user":"u1"}`}, 400, "invalid_param", "query"},
		{"wrong enum value", request{method: "POST", path: "/v1/chat-messages",
			body: `{"query":"hi","inputs":{},"user":"u1","response_mode":"fast"}`}, 400, "invalid_param", "response_mode"},
		{"wrong type", request{method: "POST", path: "/v1/chat-messages",
			body: `{"query":"hi","inputs":"x","user":"u1"}`}, 400, "invalid_param", "inputs"},
		{"body that is not JSON", request{method: "POST", path: "/v1/chat-messages",
			body: `{"query":`}, 400, "invalid_param", "JSON"},
		{"missing body", request{method: "POST", path: "/v1/chat-messages"}, 400, "invalid_param", "body"},
		{"limit above its maximum", request{method: "GET", path: "/v1/conversations?user=u1&limit=1000"}, 400, "invalid_param", "limit"},
		{"limit below its minimum", request{method: "GET", path: "/v1/conversations?user=u1&limit=0"}, 400, "invalid_param", "limit"},
		{"limit that is not a number", request{method: "GET", path: "/v1/conversations?user=u1&limit=ten"}, 400, "invalid_param", "limit"},
		{"multipart upload without its file", request{method: "POST", path: "/v1/files/upload",
			body: noFile, contentType: noFileCT}, 400, "no_file_uploaded", ""},
		{"form body on a JSON operation", request{method: "POST", path: "/v1/chat-messages",
			body: noFile, contentType: noFileCT}, 415, "unsupported_media_type", "JSON"},
		{"multipart upload sent as JSON", request{method: "POST", path: "/v1/files/upload",
			body: `{"user":"u1"}`}, 400, "invalid_param", ""},
		// Liberal cases: these pass validation and reach the handler; anything
		// but a 400 would be a regression.
		{"null for optional fields means absent", request{method: "POST", path: "/v1/chat-messages",
			body: `{"query":"hi","inputs":{},"user":"u1","conversation_id":null,"files":null,"response_mode":null,"auto_generate_name":null}`}, 200, "", ""},
		{"unknown body fields are ignored", request{method: "POST", path: "/v1/chat-messages",
			body: `{"query":"hi","inputs":{},"user":"u1","surprise":{"a":1}}`}, 200, "", ""},
		{"unknown query parameters are ignored", request{method: "GET", path: "/v1/conversations?user=u1&limit=5&color=blue"}, 200, "", ""},
		// Without a user nothing is owned, so the conversation is not found
		// (404 rather than a 400 about the body).
		{"literal null body on DELETE", request{method: "DELETE", path: "/v1/conversations/" + convID, body: `null`}, 404, "not_found", ""},
		{"DELETE without body", request{method: "DELETE", path: "/v1/conversations/" + convID}, 404, "not_found", ""},
		{"valid multipart upload", request{method: "POST", path: "/v1/files/upload",
			body: withFile, contentType: withFileCT}, 201, "", ""},
		{"JSON content type on a GET without body", request{method: "GET", path: "/v1/info",
			header: http.Header{"Content-Type": {"application/json"}}}, 200, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.key = s.appKey
			rec := s.do(t, tc.req)
			expectStatus(t, rec, tc.wantStatus, tc.wantCode)
			if !strings.Contains(rec.Body.String(), tc.wantMessage) {
				t.Errorf("message should name %q: %s", tc.wantMessage, rec.Body)
			}
		})
	}
}

func TestRoutingErrors(t *testing.T) {
	s := newTestServer(t)
	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
	}{
		{"unknown path under /v1", request{method: "GET", path: "/v1/no-such-thing", key: s.appKey}, 404, "not_found"},
		{"unknown path outside /v1", request{method: "GET", path: "/nothing-here"}, 404, "not_found"},
		{"wrong method on a known path", request{method: "PUT", path: "/v1/chat-messages", key: s.appKey, body: chatBody}, 405, "method_not_allowed"},
		{"wrong method without a key", request{method: "DELETE", path: "/v1/info"}, 405, "method_not_allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expectStatus(t, s.do(t, tc.req), tc.wantStatus, tc.wantCode)
		})
	}
}

func TestPanicBecomesMaskedInternalError(t *testing.T) {
	s := newTestServer(t)
	s.e.GET("/panic-for-test", func(echo.Context) error { panic("secret internals") })
	rec := s.do(t, request{method: "GET", path: "/panic-for-test"})
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500", rec.Code)
	}
	if got := errorCode(t, rec); got != "internal_server_error" {
		t.Errorf("code = %q", got)
	}
	if strings.Contains(rec.Body.String(), "secret") {
		t.Errorf("panic value leaked to the client: %s", rec.Body)
	}
	if rec.Header().Get(echo.HeaderXRequestID) == "" {
		t.Error("no request id on the response")
	}
}

func TestServesItsOwnDescription(t *testing.T) {
	s := newTestServer(t)
	_, _, want := loadContract(t)
	rec := s.do(t, request{method: "GET", path: "/openapi.yaml"})
	if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), want) {
		t.Fatalf("GET /openapi.yaml: status %d, %d bytes (want %d)", rec.Code, rec.Body.Len(), len(want))
	}
}

func TestAppInfo(t *testing.T) {
	s := newTestServer(t)
	rec := s.do(t, request{method: "GET", path: "/v1/info", key: s.appKey})
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	for _, want := range []string{`"name":"appkb demo chat"`, `"mode":"chat"`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("body lacks %s: %s", want, rec.Body)
		}
	}
}
