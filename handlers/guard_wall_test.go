package handlers_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"appkb/handlers"
	"appkb/handlers/admission"
	"appkb/handlers/ratelimit"
)

// rawRequest opens a connection to srv and sends the head of a POST to
// path with a body of length bytes announced, of which only first is sent.
func rawRequest(t *testing.T, srv *httptest.Server, path, auth string, length int, first string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	if auth != "" {
		head += "Authorization: " + auth + "\r\n"
	}
	head += fmt.Sprintf("Content-Length: %d\r\n\r\n", length)
	if _, err := io.WriteString(conn, head+first); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readAnswer reads one response from conn, failing after within.
func readAnswer(t *testing.T, conn net.Conn, within time.Duration) (*http.Response, []byte) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(within))
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %s: %v", within, err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	// The server closes the connection after an answer given before the
	// body was read (it does not wait for the rest of a slow body).
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("connection still open after the answer (read: %v)", err)
	}
	return res, body
}

func checkErrorAnswer(t *testing.T, body []byte, status int, code string) {
	t.Helper()
	doc, _, _ := loadContract(t)
	rec := httptest.NewRecorder()
	rec.Body.Write(body)
	checkErrorBody(t, doc, rec)
	var e struct {
		Code   string
		Status int
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Status != status || (code != "" && e.Code != code) {
		t.Errorf("answer %s, want status %d code %q", body, status, code)
	}
}

// Requests without a valid key are answered 401 from their headers alone:
// they take no admission slot, their slowly sent bodies are not waited for,
// and the requests of a valid key still get through while they are open.
func TestKeyIsCheckedBeforeAdmission(t *testing.T) {
	l := admission.New(2, 50*time.Millisecond)
	s := newLimitedServer(t, handlers.Limits{Admission: l, BodyTimeout: time.Minute})
	srv := httptest.NewServer(s.e)
	t.Cleanup(srv.Close) // after the connections are closed
	auths := []struct{ name, header string }{
		{"no header", ""},
		{"not bearer", "Basic dXNlcjpwdw=="},
		{"unknown key", "Bearer app-doesnotexist"},
		{"wrong kind of key", "Bearer " + s.knowledgeKey},
	}
	var conns []net.Conn
	for i := range 24 {
		a := auths[i%len(auths)]
		conns = append(conns, rawRequest(t, srv, "/v1/chat-messages", a.header, 100_000, `{"query":`))
	}
	for i, conn := range conns {
		a := auths[i%len(auths)]
		res, body := readAnswer(t, conn, 5*time.Second)
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: status %d, want 401: %s", a.name, res.StatusCode, body)
		}
		checkErrorAnswer(t, body, http.StatusUnauthorized, "unauthorized")
	}
	if n := l.InFlight(); n != 0 {
		t.Fatalf("%d slots taken by requests without a valid key", n)
	}
	// Two slots, both free: a valid key is served.
	for range 3 {
		rec := s.do(t, request{method: "GET", path: "/v1/info", key: s.appKey})
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /v1/info: %d %s", rec.Code, rec.Body)
		}
	}
}

// A body must keep arriving at the minimum rate: a trickle is cut off with
// 408 in the error shape and gives its slot back, while a body that arrives
// steadily may take longer than the base timeout.
func TestSlowBodiesAreCutOff(t *testing.T) {
	chat := `{"query":"hi","inputs":{},"user":"u1","response_mode":"blocking"}`
	cases := []struct {
		name    string
		minRate int
		chunk   int           // bytes sent at a time (leading spaces, then the JSON)
		every   time.Duration // pause between chunks
		total   int           // bytes of padding
		want    int
	}{
		// 10 bytes a second, far below 500.
		{"trickle", 500, 1, 100 * time.Millisecond, 50, http.StatusRequestTimeout},
		// 5,000 bytes a second for 1.5 s, three times the base timeout.
		{"steady upload outlasts the base timeout", 500, 500, 100 * time.Millisecond, 7500, http.StatusOK},
		// The same upload with a fixed timeout is cut off.
		{"fixed timeout", 0, 500, 100 * time.Millisecond, 7500, http.StatusRequestTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := admission.New(4, 50*time.Millisecond)
			s := newLimitedServer(t, handlers.Limits{Admission: l, BodyTimeout: 500 * time.Millisecond, BodyMinRate: tc.minRate})
			srv := httptest.NewServer(s.e)
			t.Cleanup(srv.Close)
			conn := rawRequest(t, srv, "/v1/chat-messages", "Bearer "+s.appKey, tc.total+len(chat), "")
			began := time.Now()
			sent := 0
			go func() {
				for sent < tc.total {
					if _, err := io.WriteString(conn, strings.Repeat(" ", tc.chunk)); err != nil {
						return
					}
					sent += tc.chunk
					time.Sleep(tc.every)
				}
				io.WriteString(conn, chat)
			}()
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			took := time.Since(began)
			if res.StatusCode != tc.want {
				t.Fatalf("status %d after %s, want %d: %s", res.StatusCode, took, tc.want, body)
			}
			if tc.want == http.StatusRequestTimeout {
				checkErrorAnswer(t, body, http.StatusRequestTimeout, "")
				if took < 500*time.Millisecond {
					t.Errorf("cut off after %s, before the base timeout", took)
				}
			} else if took < time.Second {
				t.Errorf("answered after %s: the upload did not outlast the base timeout", took)
			}
			deadline := time.Now().Add(5 * time.Second)
			for l.InFlight() != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := l.InFlight(); n != 0 {
				t.Fatalf("%d slots still taken", n)
			}
			if rec := s.do(t, request{method: "GET", path: "/v1/info", key: s.appKey}); rec.Code != http.StatusOK {
				t.Fatalf("GET /v1/info afterwards: %d %s", rec.Code, rec.Body)
			}
		})
	}
}

// Requests with a missing or unknown key are limited per client address:
// past the burst they get 429 with Retry-After without their key being
// looked up, while a valid key from the same address still gets through.
func TestUnknownKeysAreRateLimitedPerAddress(t *testing.T) {
	s := newLimitedServer(t, handlers.Limits{UnknownKeys: ratelimit.New(0.01, 3)})
	var got []int
	for range 5 {
		rec := s.do(t, request{method: "GET", path: "/v1/info", key: "app-guessed"})
		got = append(got, rec.Code)
		if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if fmt.Sprint(got) != "[401 401 401 429 429]" {
		t.Fatalf("statuses %v, want three 401 then 429", got)
	}
	// Another address has its own budget.
	r := request{method: "GET", path: "/v1/info", key: "app-guessed"}
	req := r.build()
	req.RemoteAddr = "192.0.2.7:4000"
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("other address: %d, want 401", rec.Code)
	}
	// A valid key is not charged, but its address is over the limit.
	if rec := s.do(t, request{method: "GET", path: "/v1/info", key: s.appKey}); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("valid key from a blocked address: %d, want 429", rec.Code)
	}
}

// A lost database is a 503 service_unavailable with Retry-After, never a
// 500: the request may be sent again once the database is back.
func TestLostDatabaseAnswers503(t *testing.T) {
	s := newTestServer(t)
	if rec := s.do(t, request{method: "GET", path: "/v1/info", key: s.appKey}); rec.Code != http.StatusOK {
		t.Fatalf("before: %d %s", rec.Code, rec.Body)
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.Close()
	for _, r := range []request{
		{method: "GET", path: "/v1/info", key: s.appKey},
		{method: "GET", path: "/v1/conversations?user=u1", key: s.appKey},
		{method: "GET", path: "/v1/datasets", key: s.knowledgeKey},
	} {
		rec := s.do(t, r)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s: %d, Retry-After %q: %s", r.path, rec.Code, rec.Header().Get("Retry-After"), rec.Body)
			continue
		}
		checkErrorAnswer(t, rec.Body.Bytes(), http.StatusServiceUnavailable, "service_unavailable")
	}
}

// /v1/chat/completions applies --max-text to every message, and ten times
// it to all messages together.
func TestChatCompletionTextLimits(t *testing.T) {
	s := newLimitedServer(t, handlers.Limits{MaxText: 10})
	msg := func(role, text string) string { return `{"role":"` + role + `","content":"` + text + `"}` }
	long := strings.Repeat("a", 11)
	var history []string
	for range 6 {
		history = append(history, msg("user", "0123456789"), msg("assistant", "0123456789"))
	}
	cases := []struct {
		name     string
		messages []string
		status   int
		want     string
	}{
		{"short", []string{msg("user", "hi")}, 200, ""},
		{"long query", []string{msg("user", long)}, 400, "messages[0] is too long"},
		{"long system message", []string{msg("system", long), msg("user", "hi")}, 400, "messages[0] is too long"},
		{"long earlier turn", []string{msg("user", "hi"), msg("assistant", long), msg("user", "hi")}, 400, "messages[1] is too long"},
		{"long parts", []string{`{"role":"user","content":[{"type":"text","text":"` + long + `"}]}`}, 400, "messages[0] is too long"},
		{"history too long in all", append(history, msg("user", "hi")), 400, "too long together"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"x","messages":[` + strings.Join(tc.messages, ",") + `]}`
			rec := s.do(t, request{method: "POST", path: "/v1/chat/completions", key: s.appKey, body: body})
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("got %d %s", rec.Code, rec.Body)
			}
		})
	}
}
