package handlers_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"appkb/db"
	"appkb/handlers"
	"appkb/handlers/journal"
	"appkb/internal/llm"
	"appkb/internal/wiring"
)

// scenarioApp imports testdata/apps/chat.yml ("Travel concierge") into s
// and returns its key and id.
func scenarioApp(t *testing.T, s *adminServer) (key, id string) {
	t.Helper()
	dsl, err := os.ReadFile("../testdata/apps/chat.yml")
	if err != nil {
		t.Fatal(err)
	}
	var app map[string]any
	rec := s.admin(t, "POST", "/apps", string(dsl), "application/octet-stream")
	expectStatus(t, rec, 201, "")
	decodeInto(t, rec, &app)
	return app["api_key"].(string), app["app_id"].(string)
}

func scenarioChat(query, mode, conversation string) string {
	b, _ := json.Marshal(map[string]any{"query": query, "user": "u1", "inputs": map[string]any{"traveller": "solo"},
		"response_mode": mode, "conversation_id": conversation})
	return string(b)
}

// TestScenarioRulesThroughRouter sends chat messages through the real
// router to an app whose built-in model follows a scenario set with PUT
// /admin/v1/scenario, one case per kind of rule.
func TestScenarioRulesThroughRouter(t *testing.T) {
	s := newAdminServer(t, false)
	key, _ := scenarioApp(t, s)
	scenario := `rules:
  - name: by regex
    regex: '^order #[0-9]+$'
    answer: Order found.
  - name: by substring
    query: Lisbon
    answer: Lisbon is lovely in May.
  - name: by turn
    query: again
    turn: 2
    answer: This is your second question.
  - name: chunks
    query: stream me
    chunks: ["Hel", "lo ", "there."]
    chunk_delay: 40ms
  - name: reasoning
    query: think first
    reasoning: The user wants a plan.
    answer: Here is the plan.
  - name: usage
    query: count tokens
    answer: Counted.
    usage: {prompt_tokens: 123, completion_tokens: 45}
  - name: by app
    app: Travel concierge
    query: which app
    answer: The travel app.
  - name: another app only
    app: Some other app
    query: nowhere
    answer: Never said here.
`
	expectStatus(t, s.admin(t, "PUT", "/scenario", scenario, "application/octet-stream"), 200, "")

	blocking := func(t *testing.T, query, conversation string) map[string]any {
		t.Helper()
		rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key, body: scenarioChat(query, "blocking", conversation)})
		expectStatus(t, rec, 200, "")
		var out map[string]any
		decodeInto(t, rec, &out)
		return out
	}
	tests := []struct {
		name, query string
		want        string // the whole answer
		notWant     string // or, for a rule that must not match, text it must not hold
	}{
		{"regex matches", "order #42", "Order found.", ""},
		{"regex is anchored", "my order #42 please", "", "Order found."},
		{"substring, any case", "Tell me about LISBON", "Lisbon is lovely in May.", ""},
		{"app by name", "which app is this", "The travel app.", ""},
		{"another app's rule stays out", "nowhere to go", "", "Never said here."},
		{"turn 2 does not match turn 1", "again please", "", "second question"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			answer, _ := blocking(t, tc.query, "")["answer"].(string)
			if tc.want != "" && answer != tc.want {
				t.Fatalf("answer %q, want %q", answer, tc.want)
			}
			if tc.notWant != "" && strings.Contains(answer, tc.notWant) {
				t.Fatalf("answer %q holds %q", answer, tc.notWant)
			}
		})
	}

	t.Run("turn 2 matches the second question of a conversation", func(t *testing.T) {
		first := blocking(t, "again please", "")
		conv, _ := first["conversation_id"].(string)
		if conv == "" {
			t.Fatalf("no conversation: %v", first)
		}
		if answer, _ := blocking(t, "again please", conv)["answer"].(string); answer != "This is your second question." {
			t.Fatalf("turn 2: %q", answer)
		}
	})

	t.Run("chunks are the streamed pieces, each after its delay", func(t *testing.T) {
		start := time.Now()
		rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key, body: scenarioChat("stream me", "streaming", "")})
		took := time.Since(start)
		expectStatus(t, rec, 200, "")
		var pieces []string
		for _, f := range readFrames(t, rec.Body.String()) {
			if f.str("event") == "message" {
				pieces = append(pieces, f.str("answer"))
			}
		}
		if strings.Join(pieces, "|") != "Hel|lo |there." {
			t.Fatalf("streamed pieces %q", pieces)
		}
		// Three delays of 40 ms: a lower bound only, never an upper one.
		if took < 120*time.Millisecond {
			t.Fatalf("the stream took %v, less than its three chunk delays", took)
		}
	})

	t.Run("reasoning comes before the answer in a think block", func(t *testing.T) {
		answer, _ := blocking(t, "think first", "")["answer"].(string)
		i, j := strings.Index(answer, "The user wants a plan."), strings.Index(answer, "Here is the plan.")
		if !strings.Contains(answer, "<think>") || i < 0 || j < i {
			t.Fatalf("answer %q", answer)
		}
	})

	t.Run("usage replaces the counted tokens", func(t *testing.T) {
		out := blocking(t, "count tokens", "")
		usage, _ := out["metadata"].(map[string]any)["usage"].(map[string]any)
		if usage["prompt_tokens"] != 123.0 || usage["completion_tokens"] != 45.0 || usage["total_tokens"] != 168.0 {
			t.Fatalf("usage %v", usage)
		}
	})
}

// upstreamFailure is a fake OpenAI-compatible server that fails every
// chat completion the way one kind of scripted failure imitates.
func upstreamFailure(t *testing.T, kind string) *httptest.Server {
	t.Helper()
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch kind {
		case "rate_limit":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests"}}`)
		case "server_error":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"error":{"message":"The server had an error while processing your request"}}`)
		case "quota":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"insufficient_quota: you exceeded your current quota"}}`)
		case "unauthorized":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided"}}`)
		case "timeout":
			// Longer than the provider's timeout; ends with the request.
			select {
			case <-r.Context().Done():
			case <-quit:
			}
		case "malformed":
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"stream":true`) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: {\"id\": \"x\", \"choices\": [ this is not json\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id": "x", "choices": [ this is not json`)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(quit) }) // first: Close waits for the handlers
	return srv
}

// failureServer is newAdminServer over the given model registry.
func failureServer(t *testing.T, reg *llm.Registry) *adminServer {
	t.Helper()
	_, _, specYAML := loadContract(t)
	gdb := db.OpenTemp(t)
	scenarios := llm.NewScenarios(nil)
	reg.FollowScenarios(scenarios)
	e, err := wiring.NewServer(handlers.Deps{DB: gdb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SpecYAML: specYAML,
		DataDir: t.TempDir(), Models: reg, Admin: handlers.Admin{Token: adminToken, Journal: journal.New(10), Scenarios: scenarios}})
	if err != nil {
		t.Fatal(err)
	}
	return &adminServer{testServer: &testServer{e: e, db: gdb}, scenarios: scenarios}
}

// TestScenarioFailuresMatchRemoteProvider checks each scripted provider
// failure against the same failure of a real remote provider (an
// OpenAI-compatible server answering 429 for a rate limit or the quota,
// 401, 500, broken JSON, or nothing before the provider's timeout): the
// client sees the same status and error code, blocking and streaming.
func TestScenarioFailuresMatchRemoteProvider(t *testing.T) {
	scripted := failureServer(t, mustParse(t, nil))
	scriptedKey, _ := scenarioApp(t, scripted)
	expectStatus(t, scripted.admin(t, "PUT", "/scenario", `rules:
  - {query: rate, fail: rate_limit}
  - {query: server, fail: server_error}
  - {query: malformed, fail: malformed}
  - {query: timeout, fail: timeout}
  - {query: quota, fail: quota}
  - {query: unauthorized, fail: unauthorized}
`, "application/octet-stream"), 200, "")

	type outcome struct {
		status       int
		code         string
		eventCode    string
		eventStatus  float64
		endedOnError bool
	}
	observe := func(t *testing.T, s *adminServer, key, query string) outcome {
		t.Helper()
		var o outcome
		rec := s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key, body: scenarioChat(query, "blocking", "")})
		o.status = rec.Code
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		o.code, _ = body["code"].(string)
		rec = s.do(t, request{method: "POST", path: "/v1/chat-messages", key: key, body: scenarioChat(query, "streaming", "")})
		frames := readFrames(t, rec.Body.String())
		if len(frames) > 0 {
			last := frames[len(frames)-1]
			o.endedOnError = last.str("event") == "error"
			o.eventCode, _ = last["code"].(string)
			o.eventStatus, _ = last["status"].(float64)
		}
		return o
	}
	for _, kind := range []string{"rate_limit", "quota", "unauthorized", "server_error", "timeout", "malformed"} {
		t.Run(kind, func(t *testing.T) {
			up := upstreamFailure(t, kind)
			remote := failureServer(t, mustParse(t, []byte("providers:\n  - name: deepseek\n    base_url: "+up.URL+"/v1\n    max_retries: 0\n    timeout: 200ms\n    defaults: {chat: deepseek-chat}\n")))
			remoteKey, _ := scenarioApp(t, remote)
			query := map[string]string{"rate_limit": "rate", "server_error": "server", "malformed": "malformed",
				"timeout": "timeout", "quota": "quota", "unauthorized": "unauthorized"}[kind]
			want := observe(t, remote, remoteKey, "a question")
			got := observe(t, scripted, scriptedKey, query)
			if want.status < 400 || want.code == "" || !want.endedOnError {
				t.Fatalf("the remote provider's failure is not one: %+v", want)
			}
			t.Logf("%s: %+v", kind, got)
			if got != want {
				t.Fatalf("scripted %s surfaces as %+v, the remote provider's as %+v", kind, got, want)
			}
		})
	}
}

func mustParse(t *testing.T, providers []byte) *llm.Registry {
	t.Helper()
	reg, err := llm.Parse(providers, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
