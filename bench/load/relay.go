package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// The relay is the least a server can do for a chat message and still make
// the upstream calls appkb makes: it reads the request, asks the upstream
// for the answer and, beside it, for a conversation title (appkb names
// every new conversation with the model, as Dify does), and passes the
// answer on, blocking or as a stream of message events. It checks no key,
// stores nothing and validates nothing. Measured next to appkb, it shows
// how much of appkb's distance to the upstream is the HTTP work itself.

type relay struct {
	srv  *http.Server
	base string
}

// startRelay serves POST /v1/chat-messages on a free local port, relaying
// to the upstream at upstreamBase.
func startRelay(upstreamBase string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
	call := func(body map[string]any) (*http.Response, error) {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		res, err := client.Post(upstreamBase+"/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		if res.StatusCode != http.StatusOK {
			res.Body.Close()
			return nil, fmt.Errorf("upstream status %d", res.StatusCode)
		}
		return res, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat-messages", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Query        string `json:"query"`
			ResponseMode string `json:"response_mode"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		go func() { // the title: nobody waits for it
			res, err := call(map[string]any{"model": "fake", "max_tokens": 32, "messages": []map[string]string{
				{"role": "system", "content": "Write a short title for this conversation."}, {"role": "user", "content": req.Query}}})
			if err == nil {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}()
		streaming := req.ResponseMode == "streaming"
		res, err := call(map[string]any{"model": "fake", "stream": streaming, "messages": []map[string]string{
			{"role": "user", "content": req.Query}}})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		if !streaming {
			var answer struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			if err := json.NewDecoder(res.Body).Decode(&answer); err != nil || len(answer.Choices) == 0 {
				http.Error(w, "bad upstream answer", http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"event": "message", "answer": answer.Choices[0].Message.Content})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		flusher, _ := w.(http.Flusher)
		enc := json.NewEncoder(w)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var chunk struct {
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal([]byte(data), &chunk) != nil || len(chunk.Choices) == 0 || chunk.Choices[0].Delta.Content == "" {
				continue
			}
			io.WriteString(w, "data: ")
			enc.Encode(map[string]any{"event": "message", "answer": chunk.Choices[0].Delta.Content})
			io.WriteString(w, "\n")
			if flusher != nil {
				flusher.Flush()
			}
		}
		io.WriteString(w, "data: {\"event\":\"message_end\"}\n\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &relay{srv: srv, base: "http://" + ln.Addr().String() + "/v1"}, nil
}
