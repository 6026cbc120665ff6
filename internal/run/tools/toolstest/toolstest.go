// Package toolstest starts the tool servers tests call: an MCP server (the
// official Go SDK's, over Streamable HTTP and SSE) and an OpenAPI service.
package toolstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPKey is the header value the MCP test server wants in X-Test-Key.
const MCPKey = "secret-key"

// PNG is a tiny image the "picture" tool returns.
var PNG = []byte("\x89PNG\r\n\x1a\n-appkb-test-image")

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type empty struct{}

// newMCPServer builds the server with its tools: add (a+b), fail (always
// reports an error), slow (waits until the call is cancelled or the server closes) and picture
// (returns a PNG image).
func newMCPServer(done <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "appkb-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Title: "Add numbers", Description: "Adds two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%g", in.A+in.B)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the disk is on fire"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Never finishes on its own."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
			case <-done:
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Description: "Draws a picture."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: PNG}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Answers with bytes characters of text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Bytes)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "bigjson", Description: "Answers with an object holding bytes characters, as structured content and as its text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			obj := map[string]any{"data": strings.Repeat("y", in.Bytes)}
			text, _ := json.Marshal(obj)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: obj}, nil, nil
		})
	return s
}

type bigIn struct {
	Bytes int `json:"bytes"`
}

// requireKey refuses requests without the X-Test-Key header.
func requireKey(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test-Key") != MCPKey {
			http.Error(w, "missing key", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// MCP starts the MCP server; its Streamable HTTP endpoint is URL+"/mcp"
// and its SSE endpoint URL+"/sse". Both want the X-Test-Key header.
func MCP(t testing.TB) *httptest.Server {
	srv, _ := MCPCounting(t)
	return srv
}

// MCPCounting is MCP, also counting the sessions clients open: initialize
// requests on the Streamable HTTP endpoint, streams on the SSE endpoint.
func MCPCounting(t testing.TB) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	done := make(chan struct{})
	s := newMCPServer(done)
	var sessions atomic.Int64
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", requireKey(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"method":"initialize"`)) {
				sessions.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		streamable.ServeHTTP(w, r)
	})))
	mux.Handle("/sse", requireKey(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			sessions.Add(1)
		}
		sse.ServeHTTP(w, r)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// Runs before srv.Close, which waits for calls in progress.
	t.Cleanup(func() { close(done) })
	return srv, &sessions
}

// WeatherSchema is the OpenAPI document of the OpenAPI test service; the
// server URL is filled in by OpenAPI.
const WeatherSchema = `openapi: 3.0.0
info: {title: Weather, version: "1"}
servers:
- url: SERVER
paths:
  /weather/{city}:
    get:
      operationId: getWeather
      summary: Tells the weather of a city.
      parameters:
      - {name: city, in: path, required: true, schema: {type: string}}
      - {name: unit, in: query, schema: {type: string, enum: [C, F]}}
      responses:
        "200": {description: ok}
  /notes:
    post:
      operationId: addNote
      summary: Stores a note.
      requestBody:
        content:
          application/json:
            schema:
              type: object
              required: [text]
              properties:
                text: {type: string}
      responses:
        "200": {description: ok}
`

// WeatherKey is the API key the OpenAPI test service wants in X-Api-Key.
const WeatherKey = "weather-key"

// OpenAPI starts the weather service and gives it with its schema.
func OpenAPI(t testing.TB) (*httptest.Server, string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /weather/{city}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != WeatherKey {
			http.Error(w, `{"error":"bad key"}`, http.StatusUnauthorized)
			return
		}
		unit := r.URL.Query().Get("unit")
		if unit == "" {
			unit = "C"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"city": r.PathValue("city"), "sky": "sunny", "temperature": 21, "unit": unit})
	})
	mux.HandleFunc("POST /notes", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"stored": body["text"]})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, strings.Replace(WeatherSchema, "SERVER", srv.URL, 1)
}
