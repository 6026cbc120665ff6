// Package faults injects the failures a client's tests ask for in the
// X-Appkb-Fault request header: a delay before the answer, an error status
// in the contract's shape, an event stream cut after some events, or an
// error event in the middle of a stream. The server honours the header only
// when it was started with --faults.
package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header is the request header that carries the faults.
const Header = "X-Appkb-Fault"

// MaxDelay bounds a requested delay.
const MaxDelay = 60 * time.Second

// Fault is what one request asked for. The zero value injects nothing.
type Fault struct {
	Delay time.Duration
	// Status, when set, answers the request with this status and an error
	// body instead of running it.
	Status int
	// Code is the error code of that body; it defaults to one that fits the
	// status.
	Code string
	// CutAfter, when above zero, closes the connection after that many
	// events of an event stream (0 with Cut set: before the first one).
	CutAfter int
	Cut      bool
	// ErrorEvent, when set, replaces the event after ErrorAfter events with
	// an error event of this code and ends the stream.
	ErrorEvent string
	ErrorAfter int
}

// Parse reads the header's comma-separated key=value items: delay=300ms,
// status=503, code=CODE, cut-after=5, error-event=CODE, error-after=N.
func Parse(h string) (Fault, error) {
	var f Fault
	for _, item := range strings.Split(h, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k, v = strings.TrimSpace(strings.ToLower(k)), strings.TrimSpace(v)
		if !ok || v == "" {
			return Fault{}, fmt.Errorf("%s: %q is not key=value", Header, item)
		}
		switch k {
		case "delay":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > MaxDelay {
				return Fault{}, fmt.Errorf("%s: delay must be a duration such as 300ms, at most %s", Header, MaxDelay)
			}
			f.Delay = d
		case "status":
			n, err := strconv.Atoi(v)
			if err != nil || n < 400 || n > 599 {
				return Fault{}, fmt.Errorf("%s: status must be an error status (400-599)", Header)
			}
			f.Status = n
		case "code":
			f.Code = v
		case "cut-after":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return Fault{}, fmt.Errorf("%s: cut-after must be a number of events", Header)
			}
			f.CutAfter, f.Cut = n, true
		case "error-event":
			f.ErrorEvent = v
		case "error-after":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return Fault{}, fmt.Errorf("%s: error-after must be a number of events", Header)
			}
			f.ErrorAfter = n
		default:
			return Fault{}, fmt.Errorf("%s: unknown item %q (delay, status, code, cut-after, error-event, error-after)", Header, k)
		}
	}
	return f, nil
}

// Body is the error body an injected status answers with.
func (f Fault) Body() map[string]any {
	code := f.Code
	if code == "" {
		code = defaultCode(f.Status)
	}
	return map[string]any{"status": f.Status, "code": code,
		"message": fmt.Sprintf("Injected by %s: status %d.", Header, f.Status)}
}

func defaultCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_param"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusTooManyRequests:
		return "too_many_requests"
	case http.StatusServiceUnavailable:
		return "service_unavailable"
	}
	if status >= 500 {
		return "internal_server_error"
	}
	return "bad_request"
}

// Streams says whether the fault changes an event stream.
func (f Fault) Streams() bool { return f.Cut || f.ErrorEvent != "" }

// ErrInjected is what writes fail with once an injected fault ended the
// stream, so that the server stops the run as it does for a client gone.
var ErrInjected = errors.New("the stream was ended by an injected fault")

// Writer wraps w so that the fault applies to the event stream written
// through it. Events are counted by their data frames; keep-alives pass
// and are not counted.
func (f Fault) Writer(w http.ResponseWriter) http.ResponseWriter {
	if !f.Streams() {
		return w
	}
	return &streamWriter{ResponseWriter: w, f: f}
}

type streamWriter struct {
	http.ResponseWriter
	f       Fault
	pending []byte // the start of a frame not yet complete
	events  int
	ended   bool
	lastIDs map[string]any
}

func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *streamWriter) Write(p []byte) (int, error) {
	if s.ended {
		return 0, ErrInjected
	}
	if !strings.HasPrefix(s.Header().Get("Content-Type"), "text/event-stream") {
		return s.ResponseWriter.Write(p)
	}
	s.pending = append(s.pending, p...)
	for {
		i := bytes.Index(s.pending, []byte("\n\n"))
		if i < 0 {
			return len(p), nil
		}
		frame := s.pending[:i+2]
		if err := s.frame(frame); err != nil {
			return 0, err
		}
		s.pending = s.pending[i+2:]
	}
}

// frame passes one complete frame on, or ends the stream in its place.
func (s *streamWriter) frame(frame []byte) error {
	data, isEvent := bytes.CutPrefix(frame, []byte("data: "))
	if !isEvent || bytes.HasPrefix(data, []byte("[DONE]")) {
		_, err := s.ResponseWriter.Write(frame)
		return err
	}
	if s.f.ErrorEvent != "" && s.events == s.f.ErrorAfter {
		s.ended = true
		body := map[string]any{"event": "error", "status": 500, "code": s.f.ErrorEvent,
			"message": fmt.Sprintf("Injected by %s: error event %s.", Header, s.f.ErrorEvent)}
		for k, v := range s.lastIDs {
			body[k] = v
		}
		b, _ := json.Marshal(body)
		if _, err := s.ResponseWriter.Write(append(append([]byte("data: "), b...), "\n\n"...)); err != nil {
			return err
		}
		_ = http.NewResponseController(s.ResponseWriter).Flush()
		return ErrInjected
	}
	if s.f.Cut && s.events == s.f.CutAfter {
		s.ended = true
		s.cut()
		return ErrInjected
	}
	s.remember(data)
	s.events++
	_, err := s.ResponseWriter.Write(frame)
	return err
}

// remember keeps the ids of the stream's events, which an injected error
// event carries as a real one would.
func (s *streamWriter) remember(data []byte) {
	var ids struct {
		TaskID         string `json:"task_id"`
		MessageID      string `json:"message_id"`
		ConversationID string `json:"conversation_id"`
		WorkflowRunID  string `json:"workflow_run_id"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &ids) != nil {
		return
	}
	s.lastIDs = map[string]any{}
	for k, v := range map[string]string{"task_id": ids.TaskID, "message_id": ids.MessageID,
		"conversation_id": ids.ConversationID, "workflow_run_id": ids.WorkflowRunID} {
		if v != "" {
			s.lastIDs[k] = v
		}
	}
}

// cut flushes what was sent and closes the connection without ending the
// response, as a network failure would.
func (s *streamWriter) cut() {
	rc := http.NewResponseController(s.ResponseWriter)
	_ = rc.Flush()
	conn, buf, err := rc.Hijack()
	if err != nil {
		return // a writer that cannot be hijacked (a test recorder) just stops
	}
	closeHijacked(conn, buf)
}

func closeHijacked(conn net.Conn, buf *bufio.ReadWriter) {
	if buf != nil {
		_ = buf.Flush()
	}
	_ = conn.Close()
}

func (s *streamWriter) Flush() {
	if !s.ended {
		_ = http.NewResponseController(s.ResponseWriter).Flush()
	}
}
