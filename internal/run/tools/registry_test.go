package tools_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"appkb/internal/platform/netguard"
	"appkb/internal/run/tools"
	"appkb/internal/run/tools/toolstest"
)

// loopback lets the test servers on 127.0.0.1 be reached.
var loopback = &netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "ok.yaml", "openapi: 3.0.0\ninfo: {title: x, version: '1'}\npaths:\n  /a:\n    get:\n      responses:\n        '200': {description: ok}\n")
	tests := []struct {
		name, text, wantErr string
	}{
		{"empty file", "", ""},
		{"a full file", `providers:
  a: {type: mcp, url: "http://127.0.0.1:1/mcp", headers: {Authorization: "Bearer ${TOKEN}"}}
  b: {type: openapi, schema: ok.yaml, base_url: "http://x.example", auth: {type: header, name: X-Key, value: k}}
  c: {type: workflow, app_id: 6f0e}
  bowenliang123/md_exporter/md_exporter: {type: builtin, builtin: time}
`, ""},
		{"unknown type", "providers:\n  a: {type: magic}\n", `provider "a": type must be builtin, mcp, openapi or workflow, not "magic"`},
		{"missing type", "providers:\n  a: {url: x}\n", `provider "a": type is missing`},
		{"mcp without url", "providers:\n  a: {type: mcp}\n", `provider "a": url "" is not an http or https URL`},
		{"bad transport", "providers:\n  a: {type: mcp, url: 'http://h/mcp', transport: stdio}\n", `transport must be streamable_http or sse, not "stdio"`},
		{"missing schema file", "providers:\n  a: {type: openapi, schema: nope.yaml}\n", `provider "a": the schema cannot be read`},
		{"a schema that is not OpenAPI", "providers:\n  a: {type: openapi, schema: ../" + filepath.Base(dir) + "/bad.txt}\n", `the schema`},
		{"workflow without app", "providers:\n  a: {type: workflow}\n", `type workflow needs app_id`},
		{"unknown built-in provider", "providers:\n  a: {type: builtin, builtin: nope}\n", `there is no built-in provider "nope"`},
		{"unknown key", "providers:\n  a: {type: mcp, url: 'http://h', tiemout: 3}\n", `unknown keys tiemout`},
		{"unset variable", "providers:\n  a: {type: mcp, url: 'http://h', headers: {K: '${NOPE}'}}\n", `the environment variables NOPE are not set`},
		{"auth without name", "providers:\n  a: {type: openapi, schema: ok.yaml, auth: {type: query, value: k}}\n", `auth of type query needs name`},
	}
	writeFile(t, dir, "bad.txt", "not a schema")
	env := func(k string) string {
		if k == "TOKEN" {
			return "t0k"
		}
		return ""
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tools.LoadConfig(writeFile(t, dir, "tools.yaml", tc.text), env)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// registry maps "calc" to the MCP test server (over transport), "weather"
// to the OpenAPI test service and md_exporter's plugin id to the time tools.
func registry(t *testing.T, transport string) *tools.Registry {
	t.Helper()
	mcpSrv := toolstest.MCP(t)
	apiSrv, schema := toolstest.OpenAPI(t)
	_ = apiSrv
	dir := t.TempDir()
	writeFile(t, dir, "weather.yaml", schema)
	path := "/mcp"
	if transport == tools.TransportSSE {
		path = "/sse"
	}
	cfg, err := tools.LoadConfig(writeFile(t, dir, "tools.yaml", `providers:
  calc: {type: mcp, url: "`+mcpSrv.URL+path+`", transport: `+transport+`, headers: {X-Test-Key: "`+toolstest.MCPKey+`"}, timeout: 2}
  down: {type: mcp, url: "http://127.0.0.1:1/mcp", timeout: 2}
  weather: {type: openapi, schema: weather.yaml, auth: {type: header, name: X-Api-Key, value: `+toolstest.WeatherKey+`}}
  someone/clock/clock: {type: builtin, builtin: langgenius/time/time}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	return tools.NewRegistry(cfg, loopback)
}

func TestRegistrySources(t *testing.T) {
	for _, transport := range []string{tools.TransportStreamable, tools.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			r := registry(t, transport)
			tests := []struct {
				name    string
				ref     tools.Ref
				args    map[string]any
				want    string // in the text output
				wantErr string // in the error of Find, or of the call
			}{
				{name: "MCP tool", ref: tools.Ref{ProviderType: "mcp", ProviderID: "calc", Name: "add"}, args: map[string]any{"a": 2, "b": 3.5}, want: "5.5"},
				{name: "MCP tool that reports an error", ref: tools.Ref{ProviderType: "mcp", Provider: "calc", Name: "fail"}, wantErr: "the MCP tool fail reported an error: the disk is on fire"},
				{name: "MCP tool the server lacks", ref: tools.Ref{ProviderType: "mcp", Provider: "calc", Name: "divide"}, wantErr: "offers no such tool (it has add, big, bigjson, fail, picture, slow)"},
				{name: "MCP server that is down", ref: tools.Ref{ProviderType: "mcp", Provider: "down", Name: "add"}, wantErr: "the MCP server http://127.0.0.1:1/mcp cannot be reached"},
				{name: "OpenAPI operation with path and query parameters", ref: tools.Ref{ProviderType: "api", Provider: "weather", Name: "getWeather"},
					args: map[string]any{"city": "Paris", "unit": "F"}, want: `{"city":"Paris","sky":"sunny","temperature":21,"unit":"F"}`},
				{name: "OpenAPI operation with a JSON body", ref: tools.Ref{ProviderType: "api", Provider: "weather", Name: "addNote"},
					args: map[string]any{"text": "hi"}, want: `{"stored":"hi"}`},
				{name: "OpenAPI operation lacking a required argument", ref: tools.Ref{ProviderType: "api", Provider: "weather", Name: "getWeather"},
					args: map[string]any{}, wantErr: `the parameter "city" is required`},
				{name: "a plugin mapped to a built-in provider", ref: tools.Ref{ProviderType: "plugin", Provider: "someone/clock/clock", Name: "timestamp_to_localtime"},
					args: map[string]any{"timestamp": 0}, want: "1970-01-01 00:00:00"},
				{name: "an unmapped API provider", ref: tools.Ref{ProviderType: "api", Provider: "other", Name: "x"},
					wantErr: `the tool "x" of provider "other" is of type api, which appkb can run only once the tools file (--tools) maps the provider`},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					ctx := context.Background()
					tool, err := r.Find(ctx, tc.ref)
					if err == nil {
						var args map[string]any
						if args, err = tool.Prepare(tc.args); err == nil {
							var out *tools.Output
							if out, err = tool.Run(ctx, &tools.Env{Guard: loopback}, args); err == nil && !strings.Contains(out.Text, tc.want) {
								t.Errorf("text %q, want %q", out.Text, tc.want)
							}
						}
					}
					switch {
					case tc.wantErr == "" && err != nil:
						t.Fatalf("unexpected error: %v", err)
					case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
						t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
					}
				})
			}
		})
	}
}

func TestMCPToolsThroughTheGuard(t *testing.T) {
	srv := toolstest.MCP(t)
	// Without the loopback allowance the guard refuses the test server.
	_, err := tools.ListMCP(context.Background(), tools.MCPServer{Name: "calc", URL: srv.URL + "/mcp", Headers: map[string]string{"X-Test-Key": toolstest.MCPKey}}, nil)
	if err == nil || !strings.Contains(err.Error(), "may not be reached") {
		t.Fatalf("error %v, want a refusal by the guard", err)
	}
	// A wrong key is the server's refusal, reported as such.
	_, err = tools.ListMCP(context.Background(), tools.MCPServer{Name: "calc", URL: srv.URL + "/mcp"}, loopback)
	if err == nil || !strings.Contains(err.Error(), "cannot be reached") {
		t.Fatalf("error %v, want the server's refusal", err)
	}
	list, err := tools.ListMCP(context.Background(), tools.MCPServer{Name: "calc", URL: srv.URL + "/mcp", Headers: map[string]string{"X-Test-Key": toolstest.MCPKey}}, loopback)
	if err != nil {
		t.Fatal(err)
	}
	var pic *tools.Tool
	for _, tl := range list {
		if tl.Name == "picture" {
			pic = tl
		}
	}
	out, err := pic.Run(context.Background(), nil, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Files) != 1 || out.Files[0].MimeType != "image/png" || string(out.Files[0].Data) != string(toolstest.PNG) || !strings.HasSuffix(out.Files[0].Name, ".png") {
		t.Errorf("files %+v", out.Files)
	}
}

func TestExampleFile(t *testing.T) {
	env := map[string]string{"MCP_TOKEN": "t", "WEATHER_KEY": "k"}
	cfg, err := tools.LoadConfig("tools.example.yaml", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Providers) != 5 {
		t.Errorf("%d providers", len(cfg.Providers))
	}
}

// TestMCPSessionServesSeveralCalls compares the sessions a list and three
// calls open: one for all of them through OpenMCP, one each through
// ListMCP. After Close, the tools of the session fail instead of calling.
func TestMCPSessionServesSeveralCalls(t *testing.T) {
	for _, transport := range []string{tools.TransportStreamable, tools.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			srv, sessions := toolstest.MCPCounting(t)
			path := "/mcp"
			if transport == tools.TransportSSE {
				path = "/sse"
			}
			server := tools.MCPServer{Name: "calc", URL: srv.URL + path, Transport: transport, Headers: map[string]string{"X-Test-Key": toolstest.MCPKey}}
			add := func(list []*tools.Tool) *tools.Tool {
				for _, tl := range list {
					if tl.Name == "add" {
						return tl
					}
				}
				t.Fatal("no add tool")
				return nil
			}
			callThrice := func(tl *tools.Tool) {
				for i := range 3 {
					out, err := tl.Run(context.Background(), nil, map[string]any{"a": float64(i), "b": 40.0})
					if err != nil || out.Text != fmt.Sprint(i+40) {
						t.Fatalf("call %d: %v, %v", i, out, err)
					}
				}
			}

			list, err := tools.ListMCP(context.Background(), server, loopback)
			if err != nil {
				t.Fatal(err)
			}
			callThrice(add(list))
			if n := sessions.Load(); n != 4 {
				t.Errorf("ListMCP: %d sessions for a list and three calls, want 4", n)
			}

			sessions.Store(0)
			sess, list, err := tools.OpenMCP(context.Background(), server, loopback)
			if err != nil {
				t.Fatal(err)
			}
			tl := add(list)
			callThrice(tl)
			if n := sessions.Load(); n != 1 {
				t.Errorf("OpenMCP: %d sessions for a list and three calls, want 1", n)
			}
			sess.Close()
			if _, err := tl.Run(context.Background(), nil, map[string]any{"a": 1.0, "b": 1.0}); err == nil {
				t.Error("a call after Close succeeded")
			}
		})
	}
}

// TestOpenMCPRefusals: OpenMCP goes through the guard and reports a server
// that does not answer within its timeout.
func TestOpenMCPRefusals(t *testing.T) {
	srv := toolstest.MCP(t)
	server := tools.MCPServer{Name: "calc", URL: srv.URL + "/mcp", Headers: map[string]string{"X-Test-Key": toolstest.MCPKey}}
	if _, _, err := tools.OpenMCP(context.Background(), server, nil); err == nil || !strings.Contains(err.Error(), "may not be reached") {
		t.Fatalf("error %v, want a refusal by the guard", err)
	}
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer silent.Close()
	defer close(release) // before Close, which waits for the handlers
	start := time.Now()
	_, _, err := tools.OpenMCP(context.Background(), tools.MCPServer{Name: "mute", URL: silent.URL + "/mcp", Timeout: 200 * time.Millisecond}, loopback)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms") || time.Since(start) > 3*time.Second {
		t.Fatalf("error %v after %v, want a timeout", err, time.Since(start))
	}
}

// TestOpenAPICallsReuseConnections calls an operation of an OpenAPI tool
// three times: the calls share one connection to the service.
func TestOpenAPICallsReuseConnections(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"city":%q}`, strings.TrimPrefix(r.URL.Path, "/weather/"))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	doc, err := openapi3.NewLoader().LoadFromData([]byte(strings.Replace(toolstest.WeatherSchema, "SERVER", srv.URL, 1)))
	if err != nil {
		t.Fatal(err)
	}
	list, err := tools.OpenAPITools(doc, "weather", &tools.Provider{}, loopback)
	if err != nil {
		t.Fatal(err)
	}
	var weather *tools.Tool
	for _, tl := range list {
		if tl.Name == "getWeather" {
			weather = tl
		}
	}
	for _, city := range []string{"Oslo", "Rome", "Lima"} {
		out, err := weather.Run(context.Background(), nil, map[string]any{"city": city})
		if err != nil || !strings.Contains(out.Text, city) {
			t.Fatalf("%s: %v, %v", city, out, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 1 {
		t.Fatalf("%d connections for three calls, want 1", conns)
	}
}

// An MCP answer is read up to tools.MaxAnswerBytes and no further; text
// under that but over tools.MaxToolText is cut before the run gets it.
func TestMCPAnswersAreCapped(t *testing.T) {
	srv := toolstest.MCP(t)
	for _, transport := range []string{tools.TransportStreamable, tools.TransportSSE} {
		path := "/mcp"
		if transport == tools.TransportSSE {
			path = "/sse"
		}
		t.Run(transport, func(t *testing.T) {
			list, err := tools.ListMCP(context.Background(), tools.MCPServer{Name: "calc", URL: srv.URL + path, Transport: transport,
				Headers: map[string]string{"X-Test-Key": toolstest.MCPKey}}, loopback)
			if err != nil {
				t.Fatal(err)
			}
			var big *tools.Tool
			for _, tl := range list {
				if tl.Name == "big" {
					big = tl
				}
			}
			cases := []struct {
				name    string
				bytes   int
				wantErr bool
				wantLen int // most bytes of text handed back
			}{
				{"small answer whole", 1000, false, 1000},
				{"long text cut", 2 * tools.MaxToolText, false, tools.MaxToolText + 64},
				{"answer over the read limit refused", 2 * tools.MaxAnswerBytes, true, 0},
			}
			for _, tc := range cases {
				out, err := big.Run(context.Background(), nil, map[string]any{"bytes": tc.bytes})
				if tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), "larger than") {
						t.Errorf("%s: error %v, want the answer refused as too large", tc.name, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if len(out.Text) > tc.wantLen || len(out.Text) < min(tc.bytes, tools.MaxToolText) {
					t.Errorf("%s: %d bytes of text, want %d at most", tc.name, len(out.Text), tc.wantLen)
				}
				if tc.bytes > tools.MaxToolText && !strings.Contains(out.Text, "[truncated") {
					t.Errorf("%s: cut text does not say so", tc.name)
				}
			}
		})
	}
}

// Structured content is kept up to tools.MaxToolText of JSON; past that it
// is left out (cut JSON would not be valid) and the text says so.
func TestMCPStructuredAnswersAreCapped(t *testing.T) {
	srv := toolstest.MCP(t)
	list, err := tools.ListMCP(context.Background(), tools.MCPServer{Name: "calc", URL: srv.URL + "/mcp",
		Headers: map[string]string{"X-Test-Key": toolstest.MCPKey}}, loopback)
	if err != nil {
		t.Fatal(err)
	}
	var big *tools.Tool
	for _, tl := range list {
		if tl.Name == "bigjson" {
			big = tl
		}
	}
	cases := []struct {
		name     string
		bytes    int
		wantJSON bool
	}{
		{"small object kept", 1000, true},
		{"object over the text cap left out", tools.MaxToolText + 10, false},
	}
	for _, tc := range cases {
		out, err := big.Run(context.Background(), nil, map[string]any{"bytes": tc.bytes})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := len(out.JSON) == 1; got != tc.wantJSON {
			t.Errorf("%s: json %v, want kept %v", tc.name, len(out.JSON), tc.wantJSON)
		}
		if len(out.Text) > tools.MaxToolText+200 {
			t.Errorf("%s: %d bytes of text", tc.name, len(out.Text))
		}
		if !tc.wantJSON && !strings.Contains(out.Text, "structured answer of") {
			t.Errorf("%s: the text does not say the object was left out: %q", tc.name, out.Text[len(out.Text)-200:])
		}
	}
}

// The answer limit holds for each call: a kept session (over SSE one
// stream carries every answer) serves many answers that add up to far
// more than tools.MaxAnswerBytes without failing or holding on to them,
// refuses one answer over it, and serves the next call after that.
func TestMCPCapIsPerCall(t *testing.T) {
	for _, transport := range []string{tools.TransportStreamable, tools.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			srv, sessions := toolstest.MCPCounting(t)
			path := "/mcp"
			if transport == tools.TransportSSE {
				path = "/sse"
			}
			sess, list, err := tools.OpenMCP(context.Background(), tools.MCPServer{Name: "calc", URL: srv.URL + path, Transport: transport,
				Headers: map[string]string{"X-Test-Key": toolstest.MCPKey}, Timeout: 20 * time.Second}, loopback)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			var big *tools.Tool
			for _, tl := range list {
				if tl.Name == "big" {
					big = tl
				}
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			const each, calls = tools.MaxAnswerBytes / 4, 12 // 15 MB in all
			steps := []struct {
				name    string
				bytes   int
				times   int
				wantErr string
			}{
				{"answers adding up past the limit", each, calls, ""},
				{"one answer over the limit", 2 * tools.MaxAnswerBytes, 1, "larger than"},
				{"a call after the refused one", 10, 1, ""},
			}
			for _, st := range steps {
				for i := 0; i < st.times; i++ {
					out, err := big.Run(context.Background(), nil, map[string]any{"bytes": st.bytes})
					switch {
					case st.wantErr != "" && (err == nil || !strings.Contains(err.Error(), st.wantErr)):
						t.Fatalf("%s: error %v, want %q", st.name, err, st.wantErr)
					case st.wantErr == "" && err != nil:
						t.Fatalf("%s, call %d: %v", st.name, i+1, err)
					case st.wantErr == "" && len(out.Text) < min(st.bytes, tools.MaxToolText):
						t.Fatalf("%s, call %d: %d bytes of text", st.name, i+1, len(out.Text))
					}
				}
				if st.times == calls {
					runtime.GC()
					runtime.ReadMemStats(&after)
					if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 32<<20 {
						t.Errorf("the heap grew by %d MB over %d answers", grew>>20, calls)
					}
					if n := sessions.Load(); n != 1 {
						t.Errorf("%d sessions for %d calls, want 1", n, calls)
					}
				}
			}
			// The refused answer may have ended the session; one new
			// one at most.
			if n := sessions.Load(); n > 2 {
				t.Errorf("%d sessions in all, want 2 at most", n)
			}
		})
	}
}
