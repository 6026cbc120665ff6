package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
	"appkb/internal/llm"
	"appkb/internal/wiring"
)

// fakeUpstream answers every chat completion at once with 64 tokens and
// their usage, like bench/load's upstream: one JSON body, or one event
// stream when the request asks for a stream.
func fakeUpstream(b *testing.B) string {
	answer := strings.Repeat(" the model says hello", 16)
	body, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "fake",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer}}},
		"usage": map[string]any{"prompt_tokens": 20, "completion_tokens": 64, "total_tokens": 84},
	})
	// A streamed answer: the role, eight parts of eight tokens, the finish
	// and the usage, all in one write.
	var stream bytes.Buffer
	chunk := func(delta map[string]any, finish any, usage any) {
		c, _ := json.Marshal(map[string]any{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}, "usage": usage})
		fmt.Fprintf(&stream, "data: %s\n\n", c)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	for i := range 8 {
		chunk(map[string]any{"content": answer[i*len(answer)/8 : (i+1)*len(answer)/8]}, nil, nil)
	}
	chunk(map[string]any{}, "stop", nil)
	chunk(map[string]any{}, nil, map[string]any{"prompt_tokens": 20, "completion_tokens": 64, "total_tokens": 84})
	stream.WriteString("data: [DONE]\n\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := io.ReadAll(r.Body)
		if bytes.Contains(req, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(stream.Bytes())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// newUpstreamServer is newServer with the demo apps' provider sent to a
// fake upstream.
func newUpstreamServer(b *testing.B) *server {
	b.Helper()
	reg, err := llm.Parse([]byte("providers:\n  - name: appkb\n    backend: openai-compatible\n    base_url: "+fakeUpstream(b)+"\n    max_retries: 0\n"), nil, true)
	if err != nil {
		b.Fatal(err)
	}
	// SQLite in a temporary directory, or a fresh PostgreSQL database
	// when APPKB_TEST_DATABASE_URL names a server.
	gdb := db.OpenTemp(b)
	checkpointInBackground(b, gdb)
	keys, err := demo.Ensure(context.Background(), apps.NewStore(gdb), apikeys.NewStore(gdb))
	if err != nil {
		b.Fatal(err)
	}
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		b.Fatal(err)
	}
	e, err := wiring.NewServer(handlers.Deps{DB: gdb, SpecYAML: spec, Models: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	e.Logger.SetOutput(io.Discard)
	return &server{e: e, key: keys.AppKey, gdb: gdb}
}

// checkpointInBackground checkpoints gdb's log in the background until the
// benchmark ends, as the server does; without it, the commit that takes the
// log past SQLite's threshold checkpoints inline and sets the slowest
// latencies.
func checkpointInBackground(b *testing.B, gdb *gorm.DB) {
	ckpt := db.NewCheckpointer(gdb, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ckpt.Start(context.Background())
	b.Cleanup(ckpt.Stop)
}

// BenchmarkUpstreamChatParallel sends blocking chat messages from 16
// concurrent clients to the demo chat app served by a fake upstream that
// answers at once: what is measured is appkb's own cost per message.
func BenchmarkUpstreamChatParallel(b *testing.B) {
	sendParallel(b, newUpstreamServer(b), "blocking")
}

// BenchmarkUpstreamStreamingParallel is BenchmarkUpstreamChatParallel with
// streamed answers: the stream from the upstream is read and written to
// the client event by event.
func BenchmarkUpstreamStreamingParallel(b *testing.B) {
	sendParallel(b, newUpstreamServer(b), "streaming")
}

// importApp imports a DSL file of bench/load into the server's database and
// returns the server with a new key of that app.
func (s *server) importApp(b *testing.B, file string) *server {
	b.Helper()
	def, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	app, err := apps.NewStore(s.gdb).Import(ctx, def)
	if err != nil {
		b.Fatal(err)
	}
	key, err := apikeys.NewStore(s.gdb).CreateAppKey(ctx, app.ID, "")
	if err != nil {
		b.Fatal(err)
	}
	return &server{e: s.e, key: key, gdb: s.gdb}
}

// BenchmarkUpstreamWorkflowParallel runs the load tool's workflow
// (bench/load/workflow.yml: code, an llm node on the fake upstream, a
// template) from 16 concurrent clients, blocking.
func BenchmarkUpstreamWorkflowParallel(b *testing.B) {
	s := newUpstreamServer(b).importApp(b, "load/workflow.yml")
	w := &workflowServer{e: s.e, key: s.key}
	w.steps(b) // fails unless a run succeeds
	w.runParallel(b)
}

// BenchmarkUpstreamChatflowParallel sends blocking messages from 16
// concurrent clients to the load tool's chatflow (bench/load/chatflow.yml:
// an llm node with memory on the fake upstream, then an answer), each
// starting a new conversation, as the chat benchmarks do.
func BenchmarkUpstreamChatflowParallel(b *testing.B) {
	s := newUpstreamServer(b).importApp(b, "load/chatflow.yml")
	s.answers(b)
	sendParallel(b, s, "blocking")
}

// BenchmarkUpstreamChatflowStreamingParallel is
// BenchmarkUpstreamChatflowParallel with streamed answers.
func BenchmarkUpstreamChatflowStreamingParallel(b *testing.B) {
	s := newUpstreamServer(b).importApp(b, "load/chatflow.yml")
	s.answers(b)
	sendParallel(b, s, "streaming")
}

// answers sends one blocking message and fails the benchmark unless it
// comes back with an answer.
func (s *server) answers(b *testing.B) {
	b.Helper()
	var res struct {
		Answer string `json:"answer"`
	}
	body := s.send(b, chatBody(0, "blocking"))
	if err := json.Unmarshal(body, &res); err != nil || res.Answer == "" {
		b.Fatalf("first message without an answer (%v): %s", err, body)
	}
}

// BenchmarkUpstreamChat sends the same blocking messages one at a time:
// its p50 is what appkb adds to a model call that costs nothing.
func BenchmarkUpstreamChat(b *testing.B) {
	s := newUpstreamServer(b)
	var l latencies
	for i := 0; b.Loop(); i++ {
		t := time.Now()
		s.send(b, chatBody(int64(i), "blocking"))
		l.add(time.Since(t))
	}
	l.report(b)
}
