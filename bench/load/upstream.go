package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"time"
)

type upstream struct {
	srv  *http.Server
	base string
}

// completionWords are the 64 tokens of every answer (one short word each).
var completionWords = func() []string {
	w := make([]string, 64)
	for i := range w {
		w[i] = []string{" the", " model", " says", " hello"}[i%4]
	}
	return w
}()

// startUpstream serves /v1/chat/completions on a free local port. Answers
// come at once with usage filled in, as a fast model server would give them.
func startUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	answer := strings.Join(completionWords, "")
	blocking, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-load", "object": "chat.completion", "created": time.Now().Unix(), "model": "fake",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer}}},
		"usage": map[string]any{"prompt_tokens": 20, "completion_tokens": 64, "total_tokens": 84},
	})
	var stream bytes.Buffer
	chunk := func(delta map[string]any, finish any, usage any) {
		c := map[string]any{"id": "chatcmpl-load", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["choices"] = []any{}
			c["usage"] = usage
		}
		b, _ := json.Marshal(c)
		stream.WriteString("data: ")
		stream.Write(b)
		stream.WriteString("\n\n")
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	for i := 0; i < len(completionWords); i += 8 {
		chunk(map[string]any{"content": strings.Join(completionWords[i:i+8], "")}, nil, nil)
	}
	chunk(map[string]any{}, "stop", nil)
	chunk(nil, nil, map[string]any{"prompt_tokens": 20, "completion_tokens": 64, "total_tokens": 84})
	stream.WriteString("data: [DONE]\n\n")
	streamBody := stream.Bytes()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(streamBody)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(blocking)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &upstream{srv: srv, base: "http://" + ln.Addr().String() + "/v1"}, nil
}

// --- appkb under test ---
