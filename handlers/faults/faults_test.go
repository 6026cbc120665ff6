package faults

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		header  string
		want    Fault
		wantErr string
	}{
		{"", Fault{}, ""},
		{"status=503", Fault{Status: 503}, ""},
		{"delay=300ms, status=429, code=too_many_requests", Fault{Delay: 300 * time.Millisecond, Status: 429, Code: "too_many_requests"}, ""},
		{"cut-after=5", Fault{CutAfter: 5, Cut: true}, ""},
		{"cut-after=0", Fault{Cut: true}, ""},
		{"error-event=provider_quota_exceeded,error-after=2", Fault{ErrorEvent: "provider_quota_exceeded", ErrorAfter: 2}, ""},
		{"status=200", Fault{}, "error status"},
		{"delay=forever", Fault{}, "delay"},
		{"delay=2m", Fault{}, "at most"},
		{"cut-after=-1", Fault{}, "cut-after"},
		{"explode=1", Fault{}, "unknown item"},
		{"status", Fault{}, "key=value"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.header)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want one about %q", tt.header, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: got %+v, %v; want %+v", tt.header, got, err, tt.want)
		}
	}
}

func TestBody(t *testing.T) {
	for _, tt := range []struct {
		f    Fault
		code string
	}{
		{Fault{Status: 503}, "service_unavailable"},
		{Fault{Status: 502}, "internal_server_error"},
		{Fault{Status: 429}, "too_many_requests"},
		{Fault{Status: 409, Code: "conflict"}, "conflict"},
	} {
		b := tt.f.Body()
		if b["code"] != tt.code || b["status"] != tt.f.Status || b["message"] == "" {
			t.Errorf("%+v: body %v", tt.f, b)
		}
	}
}

// stream serves five events through the fault's writer, as the server's
// stream pump writes them (a ping between), and reports the write error.
func stream(t *testing.T, f Fault) (string, error) {
	t.Helper()
	writeErr := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = f.Writer(w)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		var err error
		for i := 1; i <= 5 && err == nil; i++ {
			_, err = fmt.Fprintf(w, "data: {\"event\":\"message\",\"task_id\":\"t1\",\"message_id\":\"m1\",\"answer\":\"%d\"}\n\n", i)
			if err == nil && i == 2 {
				_, err = io.WriteString(w, "event: ping\n\n")
			}
			if err == nil {
				err = http.NewResponseController(w).Flush()
			}
		}
		writeErr <- err
	}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got strings.Builder
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			got.WriteString(line + "\n")
		}
	}
	if sc.Err() == nil && f.Cut {
		t.Errorf("the client read the whole stream; a cut must end it with an error")
	}
	return got.String(), <-writeErr
}

func TestStreamFaults(t *testing.T) {
	t.Run("no stream fault passes every event", func(t *testing.T) {
		got, err := stream(t, Fault{Status: 0})
		if err != nil || strings.Count(got, "\n") != 5 {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	t.Run("cut after 2 events", func(t *testing.T) {
		got, err := stream(t, Fault{Cut: true, CutAfter: 2})
		if strings.Count(got, "\n") != 2 || !strings.Contains(got, `"answer":"2"`) {
			t.Fatalf("the client got %q", got)
		}
		if !errors.Is(err, ErrInjected) {
			t.Fatalf("the server's write after the cut: %v", err)
		}
	})
	t.Run("error event after 3", func(t *testing.T) {
		got, err := stream(t, Fault{ErrorEvent: "provider_quota_exceeded", ErrorAfter: 3})
		lines := strings.Split(strings.TrimSpace(got), "\n")
		if len(lines) != 4 {
			t.Fatalf("the client got %q", got)
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[3], "data: ")), &ev); err != nil {
			t.Fatal(err)
		}
		if ev["event"] != "error" || ev["code"] != "provider_quota_exceeded" || ev["task_id"] != "t1" || ev["message_id"] != "m1" {
			t.Fatalf("error event %v", ev)
		}
		if !errors.Is(err, ErrInjected) {
			t.Fatalf("the server's write after the error event: %v", err)
		}
	})
}

func TestJSONAnswersPassUntouched(t *testing.T) {
	rec := httptest.NewRecorder()
	w := Fault{Cut: true}.Writer(rec)
	w.Header().Set("Content-Type", "application/json")
	if _, err := io.WriteString(w, `{"answer":"data: x\n\n"}`); err != nil {
		t.Fatal(err)
	}
	if rec.Body.String() != `{"answer":"data: x\n\n"}` {
		t.Fatalf("body %q", rec.Body.String())
	}
}
