package apidocs

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBundleIsSmallAndServed(t *testing.T) {
	if n := BundleSize(); n == 0 || n > 2<<20 {
		t.Fatalf("embedded bundle is %d bytes; want 0 < size <= 2 MB", n)
	}
	tests := []struct {
		name, acceptEncoding, wantEncoding string
	}{
		{"gzip client", "gzip, deflate", "gzip"},
		{"plain client", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", ScriptPath, nil)
			if tc.acceptEncoding != "" {
				req.Header.Set("Accept-Encoding", tc.acceptEncoding)
			}
			rec := httptest.NewRecorder()
			Script().ServeHTTP(rec, req)
			if got := rec.Header().Get("Content-Encoding"); got != tc.wantEncoding {
				t.Fatalf("Content-Encoding = %q, want %q", got, tc.wantEncoding)
			}
			body := rec.Body.Bytes()
			if tc.wantEncoding == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(zr)
			}
			if !strings.Contains(string(body[:min(len(body), 4096)]), "Redoc") && !bytes.Contains(body, []byte("Redoc")) {
				t.Fatal("served script is not the Redoc bundle")
			}
			if len(body) > 2<<20 {
				t.Errorf("uncompressed bundle is %d bytes, over 2 MB", len(body))
			}
		})
	}
}
