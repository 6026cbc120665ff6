package handlers_test

import "testing"

// TestAPIIndex: GET /v1/ needs no key and names the API and server
// versions in the fields Dify's Service API answers with.
func TestAPIIndex(t *testing.T) {
	s := newTestServer(t)
	tests := []struct {
		name string
		key  string
	}{
		{"without a key", ""},
		{"with an app key", s.appKey},
		{"with a knowledge key", s.knowledgeKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := s.do(t, request{method: "GET", path: "/v1/", key: tc.key})
			expectStatus(t, rec, 200, "")
			var out struct {
				Welcome       string `json:"welcome"`
				APIVersion    string `json:"api_version"`
				ServerVersion string `json:"server_version"`
			}
			kbDecode(t, rec, &out)
			if out.Welcome == "" || out.APIVersion != "v1" || out.ServerVersion != "dev" {
				t.Errorf("index %s", rec.Body)
			}
		})
	}
	expectStatus(t, s.do(t, request{method: "POST", path: "/v1/", key: s.appKey}), 405, "")
}
