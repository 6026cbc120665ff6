package handlers_test

import (
	"bufio"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"appkb/internal/run/chat"
	"appkb/models"
)

// While an answer streams, the text already sent is written to its message
// (so a server that stops mid-stream leaves it for CloseInterrupted to
// keep); a client that goes away leaves the message as status error, the
// error saying interrupted, with the text it was sent.
func TestInterruptedStreamKeepsTheSentText(t *testing.T) {
	model := newFakeModel(50*time.Millisecond, strings.SplitAfter(strings.Repeat("word ", 200), " ")...)
	s := newChatServer(t, chatOptions{models: fakeModels{model}})
	srv := httptest.NewServer(s.e)
	ctx, cancel := context.WithCancel(context.Background())
	res := liveStream(t, ctx, srv.URL, s.keys[appDemoChat], `{"query":"talk","inputs":{},"user":"u1","response_mode":"streaming"}`)
	first := firstFrame(t, bufio.NewReader(res.Body))
	id := first.str("message_id")

	var partial models.Message
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s.db.Where("id = ?", id).Take(&partial)
		if partial.Answer != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if partial.Answer == "" || !partial.Generating {
		t.Fatalf("while streaming: answer %q, generating %v; want the sent text kept as it streams", partial.Answer, partial.Generating)
	}
	cancel()
	res.Body.Close()
	<-model.ended
	srv.Close()
	m := storedMessage(t, s, id)
	if m.Status != chat.StatusError || m.Error == nil || !strings.Contains(*m.Error, "interrupted") {
		t.Fatalf("after the client went away: status %s, error %v", m.Status, m.Error)
	}
	if !strings.HasPrefix(m.Answer, partial.Answer) || len(m.Answer) < len(partial.Answer) {
		t.Fatalf("stored answer %q lost text kept while streaming (%q)", m.Answer, partial.Answer)
	}
}
