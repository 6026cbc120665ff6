package handlers_test

import "testing"

// TestEmptyOptionalQueryIsAbsent: an optional query parameter sent with an
// empty value counts as not sent (Dify's async SDK sends every filter it
// was not given that way); a required one left empty is still refused, and
// a non-empty bad value still is too.
func TestEmptyOptionalQueryIsAbsent(t *testing.T) {
	s := newTestServer(t)
	ds := kbCreate(t, s, `{"name":"q"}`).ID
	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
	}{
		{"workflow logs, every filter empty", request{method: "GET",
			path: "/v1/workflows/logs?keyword=&status=&page=&limit=&created_at__before=&created_at__after=&created_by_end_user_session_id=&created_by_account="},
			200, ""},
		{"workflow logs, bad status still refused", request{method: "GET", path: "/v1/workflows/logs?status=nope"}, 400, "invalid_param"},
		{"workflow logs, bad instant still refused", request{method: "GET", path: "/v1/workflows/logs?created_at__before=yesterday"}, 400, "invalid_param"},
		{"documents, empty status and keyword", request{method: "GET", path: "/v1/datasets/" + ds + "/documents?status=&keyword=&page=", key: s.knowledgeKey}, 200, ""},
		{"knowledge bases, empty filters", request{method: "GET", path: "/v1/datasets?keyword=&page=&limit=&include_all=", key: s.knowledgeKey}, 200, ""},
		{"conversations, empty paging", request{method: "GET", path: "/v1/conversations?user=u1&last_id=&limit=&sort_by="}, 200, ""},
		{"required user left empty is refused", request{method: "GET", path: "/v1/messages/00000000-0000-0000-0000-000000000000/suggested?user="}, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.req.key == "" {
				tt.req.key = s.appKey
			}
			expectStatus(t, s.do(t, tt.req), tt.wantStatus, tt.wantCode)
		})
	}
}
