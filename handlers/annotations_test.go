package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"appkb/internal/conversation/annotations"
)

type annotationJSON struct {
	ID        string `json:"id"`
	Question  string `json:"question"`
	Answer    string `json:"answer"`
	HitCount  int    `json:"hit_count"`
	CreatedAt int64  `json:"created_at"`
}

type annotationPage struct {
	Data    []annotationJSON `json:"data"`
	HasMore bool             `json:"has_more"`
	Limit   int              `json:"limit"`
	Total   int              `json:"total"`
	Page    int              `json:"page"`
}

func decodeInto(t *testing.T, rec *httptest.ResponseRecorder, v any) {
	t.Helper()
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
}

func TestAnnotationsAPI(t *testing.T) {
	s := newMediaServer(t, nil)
	create := func(key, q, a string) annotationJSON {
		t.Helper()
		rec := s.do(t, request{method: "POST", path: "/v1/apps/annotations", key: key,
			body: fmt.Sprintf(`{"question":%q,"answer":%q}`, q, a)})
		if rec.Code != 201 {
			t.Fatalf("create: %d %s", rec.Code, rec.Body)
		}
		var out annotationJSON
		decodeInto(t, rec, &out)
		return out
	}
	first := create(s.mediaKey, "How do I reset my password?", "Use the link on the sign-in page.")
	if first.ID == "" || first.HitCount != 0 || first.CreatedAt == 0 {
		t.Fatalf("created %+v", first)
	}
	for i := range 24 {
		create(s.mediaKey, fmt.Sprintf("question %02d", i), fmt.Sprintf("answer %02d", i))
	}
	theirs := create(s.appKey, "Another app's question", "Another app's answer")

	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
		check      func(t *testing.T, rec *httptest.ResponseRecorder)
	}{
		{"list, first page", request{method: "GET", path: "/v1/apps/annotations"}, 200, "", func(t *testing.T, rec *httptest.ResponseRecorder) {
			var p annotationPage
			decodeInto(t, rec, &p)
			if len(p.Data) != 20 || !p.HasMore || p.Total != 25 || p.Page != 1 || p.Limit != 20 || p.Data[0].Question != "question 23" {
				t.Errorf("page %+v", p)
			}
		}},
		{"list, last page", request{method: "GET", path: "/v1/apps/annotations?page=2&limit=20"}, 200, "", func(t *testing.T, rec *httptest.ResponseRecorder) {
			var p annotationPage
			decodeInto(t, rec, &p)
			if len(p.Data) != 5 || p.HasMore || p.Page != 2 || p.Data[4].ID != first.ID {
				t.Errorf("page %+v", p)
			}
		}},
		{"list, limit above 100 is reduced", request{method: "GET", path: "/v1/apps/annotations?limit=500"}, 200, "", func(t *testing.T, rec *httptest.ResponseRecorder) {
			var p annotationPage
			decodeInto(t, rec, &p)
			if p.Limit != 100 || len(p.Data) != 25 || p.HasMore {
				t.Errorf("limit %d, %d items", p.Limit, len(p.Data))
			}
		}},
		{"list with a keyword", request{method: "GET", path: "/v1/apps/annotations?keyword=PASSWORD"}, 200, "", func(t *testing.T, rec *httptest.ResponseRecorder) {
			var p annotationPage
			decodeInto(t, rec, &p)
			if p.Total != 1 || len(p.Data) != 1 || p.Data[0].ID != first.ID {
				t.Errorf("page %+v", p)
			}
		}},
		{"list, page 0 → 400", request{method: "GET", path: "/v1/apps/annotations?page=0"}, 400, "invalid_param", nil},
		{"create without an answer → 400", request{method: "POST", path: "/v1/apps/annotations", body: `{"question":"q"}`}, 400, "invalid_param", nil},
		{"create with a blank question → 400", request{method: "POST", path: "/v1/apps/annotations", body: `{"question":" ","answer":"a"}`}, 400, "invalid_param", nil},
		{"update", request{method: "PUT", path: "/v1/apps/annotations/" + first.ID,
			body: `{"question":"How can I change my password?","answer":"In your profile."}`}, 200, "", func(t *testing.T, rec *httptest.ResponseRecorder) {
			var a annotationJSON
			decodeInto(t, rec, &a)
			if a.ID != first.ID || a.Question != "How can I change my password?" || a.Answer != "In your profile." || a.CreatedAt != first.CreatedAt {
				t.Errorf("updated %+v", a)
			}
		}},
		{"update another app's annotation → 404", request{method: "PUT", path: "/v1/apps/annotations/" + theirs.ID,
			body: `{"question":"q","answer":"a"}`}, 404, "not_found", nil},
		{"update an unknown annotation → 404", request{method: "PUT", path: "/v1/apps/annotations/3f8c1c9e-0000-4000-8000-000000000000",
			body: `{"question":"q","answer":"a"}`}, 404, "not_found", nil},
		{"delete another app's annotation → 404", request{method: "DELETE", path: "/v1/apps/annotations/" + theirs.ID}, 404, "not_found", nil},
		{"delete", request{method: "DELETE", path: "/v1/apps/annotations/" + first.ID}, 204, "", nil},
		{"delete again → 404", request{method: "DELETE", path: "/v1/apps/annotations/" + first.ID}, 404, "not_found", nil},
		{"knowledge key → 401", request{method: "GET", path: "/v1/apps/annotations", key: s.knowledgeKey}, 401, "unauthorized", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.key == "" {
				tc.req.key = s.mediaKey
			}
			rec := s.do(t, tc.req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, truncate(rec.Body.String()))
			}
			if tc.wantCode != "" {
				if got := errorCode(t, rec); got != tc.wantCode {
					t.Errorf("code %q, want %q", got, tc.wantCode)
				}
			}
			if tc.check != nil {
				tc.check(t, rec)
			}
		})
	}
}

type replyJob struct {
	JobID     string  `json:"job_id"`
	JobStatus string  `json:"job_status"`
	ErrorMsg  *string `json:"error_msg"`
}

// pollJob asks for a job's status until it has finished.
func (s *mediaServer) pollJob(t *testing.T, action, id string) replyJob {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := s.do(t, request{method: "GET", path: "/v1/apps/annotation-reply/" + action + "/status/" + id, key: s.mediaKey})
		if rec.Code != 200 {
			t.Fatalf("status: %d %s", rec.Code, rec.Body)
		}
		var job replyJob
		decodeInto(t, rec, &job)
		if job.JobStatus == "completed" || job.JobStatus == "error" {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still %s", job.JobStatus)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAnnotationReplyAPI(t *testing.T) {
	s := newMediaServer(t, nil)
	rec := s.do(t, request{method: "POST", path: "/v1/apps/annotations", key: s.mediaKey,
		body: `{"question":"What are your opening hours?","answer":"Nine to five, Monday to Friday."}`})
	if rec.Code != 201 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	var ann annotationJSON
	decodeInto(t, rec, &ann)

	start := func(action, body string) replyJob {
		t.Helper()
		rec := s.do(t, request{method: "POST", path: "/v1/apps/annotation-reply/" + action, key: s.mediaKey, body: body})
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", action, rec.Code, rec.Body)
		}
		var job replyJob
		decodeInto(t, rec, &job)
		if job.JobID == "" || (job.JobStatus != "waiting" && job.JobStatus != "processing") {
			t.Fatalf("started %+v", job)
		}
		return job
	}
	builtin := `{"embedding_provider_name":"appkb","embedding_model_name":"builtin","score_threshold":0.9}`

	job := start("enable", builtin)
	if done := s.pollJob(t, "enable", job.JobID); done.JobStatus != "completed" || done.ErrorMsg == nil || *done.ErrorMsg != "" {
		t.Fatalf("job %+v", done)
	}

	// Through the app: /parameters reports the switch, and a chat message
	// that matches is answered with the annotation, not by the model.
	params := s.do(t, request{method: "GET", path: "/v1/parameters", key: s.mediaKey})
	if !strings.Contains(params.Body.String(), `"annotation_reply":{"enabled":true}`) {
		t.Errorf("/parameters does not show annotation reply on: %s", params.Body)
	}
	reply := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: s.mediaKey,
		body: `{"query":"What are your opening hours?","inputs":{},"user":"carol","response_mode":"blocking"}`})
	if !strings.Contains(reply.Body.String(), `"answer":"Nine to five, Monday to Friday."`) {
		t.Errorf("chat answer is not the annotation: %s", reply.Body)
	}

	svc := annotations.NewService(s.db, nil)
	ctx := context.Background()
	id, answer, ok, err := svc.Match(ctx, s.mediaAppID, "what are your opening hours?")
	if err != nil || !ok || id != ann.ID || answer != "Nine to five, Monday to Friday." {
		t.Fatalf("Match = %q, %q, %v, %v", id, answer, ok, err)
	}
	if _, _, ok, _ := svc.Match(ctx, s.appID, "what are your opening hours?"); ok {
		t.Error("another app matched")
	}
	rec = s.do(t, request{method: "GET", path: "/v1/apps/annotations", key: s.mediaKey})
	var p annotationPage
	decodeInto(t, rec, &p)
	if len(p.Data) != 1 || p.Data[0].HitCount != 2 { // the chat message and the Match call
		t.Errorf("hit_count after a match: %+v", p.Data)
	}

	tests := []struct {
		name       string
		req        request
		wantStatus int
		wantCode   string
	}{
		{"status asked with the other action → 400", request{method: "GET", path: "/v1/apps/annotation-reply/disable/status/" + job.JobID}, 400, "invalid_param"},
		{"status of an unknown job → 400", request{method: "GET", path: "/v1/apps/annotation-reply/enable/status/3f8c1c9e-0000-4000-8000-000000000000"}, 400, "invalid_param"},
		{"status of another app's job → 400", request{method: "GET", path: "/v1/apps/annotation-reply/enable/status/" + job.JobID, key: s.appKey}, 400, "invalid_param"},
		{"unknown action → 400", request{method: "POST", path: "/v1/apps/annotation-reply/toggle", body: builtin}, 400, "invalid_param"},
		{"missing score_threshold → 400", request{method: "POST", path: "/v1/apps/annotation-reply/enable",
			body: `{"embedding_provider_name":"appkb","embedding_model_name":"builtin"}`}, 400, "invalid_param"},
		{"score_threshold above 1 → 400", request{method: "POST", path: "/v1/apps/annotation-reply/enable",
			body: `{"embedding_provider_name":"appkb","embedding_model_name":"builtin","score_threshold":1.5}`}, 400, "invalid_param"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.key == "" {
				tc.req.key = s.mediaKey
			}
			rec := s.do(t, tc.req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, truncate(rec.Body.String()))
			}
			if got := errorCode(t, rec); got != tc.wantCode {
				t.Errorf("code %q, want %q", got, tc.wantCode)
			}
		})
	}

	t.Run("disable switches replies off", func(t *testing.T) {
		job := start("disable", builtin)
		if done := s.pollJob(t, "disable", job.JobID); done.JobStatus != "completed" {
			t.Fatalf("job %+v", done)
		}
		if _, _, ok, err := svc.Match(ctx, s.mediaAppID, "what are your opening hours?"); ok || err != nil {
			t.Errorf("matched after disable (%v)", err)
		}
	})
}
