package handlers_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pythonSDKDir is where Dify's official Python SDK is kept, unchanged
// (../shared/clients/README.md); APPKB_PYTHON_SDK may name another copy.
func pythonSDKDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("APPKB_PYTHON_SDK")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "clients", "dify-python-sdk")
	}
	if _, err := os.Stat(filepath.Join(dir, "dify_client", "client.py")); err != nil {
		t.Skipf("Dify's Python SDK is not at %s (set APPKB_PYTHON_SDK): %v", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// pythonWithHTTPX finds a Python 3 that can import httpx, the SDK's one
// dependency (Debian: python3-httpx); the test is skipped without one.
func pythonWithHTTPX(t *testing.T) string {
	t.Helper()
	for _, candidate := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(candidate)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import httpx").Run() == nil {
			return path
		}
	}
	t.Skip("no python3 with httpx: install python3-httpx (Debian) to run the Python SDK compatibility suite")
	return ""
}

// contractChecked serves h and checks every answer against openapi.yaml as
// the in-process tests do, then passes it on to the client.
func contractChecked(t *testing.T, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if strings.HasPrefix(r.URL.Path, "/v1") {
			checkResponse(t, request{method: r.Method, path: r.URL.RequestURI()}, rec)
		}
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// TestPythonSDKCompatibility runs Dify's official Python SDK, unchanged,
// against a real appkb server on 127.0.0.1: knowledge bases, documents
// created and updated from text and from files (the SDK calls the
// underscore spellings), segments, retrieval and knowledge pipelines, plus
// the async client, which sends unset filters as empty query parameters.
// A raw client then calls the four underscore routes itself.
func TestPythonSDKCompatibility(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Python interpreter")
	}
	sdk := pythonSDKDir(t)
	python := pythonWithHTTPX(t)
	s := newPipelineServer(t)
	srv := httptest.NewServer(contractChecked(t, s.e))
	defer srv.Close()

	t.Run("official SDK", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "clients", "python_sdk_knowledge.py"))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+sdk, "PYTHONDONTWRITEBYTECODE=1",
			"APPKB_BASE_URL="+srv.URL+"/v1", "APPKB_KNOWLEDGE_KEY="+s.knowledgeKey)
		out, err := cmd.CombinedOutput()
		t.Logf("python SDK:\n%s", out)
		if err != nil {
			t.Fatalf("the Python SDK script failed: %v", err)
		}
		for _, want := range []string{"ok create_document_by_text", "ok update_document_by_text", "ok create_document_by_file",
			"ok update_document_by_file", "ok add_segments", "ok update_document_segment", "ok run_rag_pipeline",
			"ok async list_documents with empty filters", "done"} {
			if !bytes.Contains(out, []byte(want+"\n")) {
				t.Errorf("the script did not report %q", want)
			}
		}
	})

	t.Run("underscore routes from a raw client", func(t *testing.T) {
		ds := kbCreate(t, s, `{"name":"raw","indexing_technique":"economy"}`).ID
		base := srv.URL + "/v1/datasets/" + ds
		send := func(method, url, contentType string, body io.Reader) (int, string) {
			t.Helper()
			req, err := http.NewRequest(method, url, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+s.knowledgeKey)
			req.Header.Set("Content-Type", contentType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		code, body := send("POST", base+"/document/create_by_text", "application/json", strings.NewReader(`{"name":"raw.txt","text":"Raw text."}`))
		if code != 200 {
			t.Fatalf("create_by_text → %d %s", code, body)
		}
		var created docCreated
		decodeString(t, body, &created)
		docWait(t, s, ds, created.Batch)
		code, body = send("POST", base+"/documents/"+created.Document.ID+"/update_by_text", "application/json", strings.NewReader(`{"name":"raw.txt","text":"New raw text."}`))
		if code != 200 {
			t.Fatalf("update_by_text → %d %s", code, body)
		}
		var updated docCreated
		decodeString(t, body, &updated)
		docWait(t, s, ds, updated.Batch)
		form, ct := multipartBody(t, "raw2.txt", []byte("Raw file text."), "")
		code, body = send("POST", base+"/document/create_by_file", ct, strings.NewReader(form))
		if code != 200 {
			t.Fatalf("create_by_file → %d %s", code, body)
		}
		var fromFile docCreated
		decodeString(t, body, &fromFile)
		docWait(t, s, ds, fromFile.Batch)
		form, ct = multipartBody(t, "raw3.txt", []byte("Other raw file text."), "")
		code, body = send("POST", base+"/documents/"+fromFile.Document.ID+"/update_by_file", ct, strings.NewReader(form))
		if code != 200 {
			t.Fatalf("update_by_file → %d %s", code, body)
		}
	})
}

func decodeString(t *testing.T, s string, v any) {
	t.Helper()
	rec := httptest.NewRecorder()
	rec.Body.WriteString(s)
	kbDecode(t, rec, v)
}
