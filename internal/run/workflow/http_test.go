package workflow

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"appkb/internal/conversation/files"
)

// echoServer answers with a JSON description of the request it got, or
// with special responses on /bin and /slow.
func echoServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bin":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte{0x89, 'P', 'N', 'G'})
			return
		case "/slow":
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Seen", "yes")
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery,
			"auth": r.Header.Get("Authorization"), "key": r.Header.Get("X-Key"), "h": r.Header.Get("X-H"),
			"ctype": r.Header.Get("Content-Type"), "body": string(body),
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func localEngine() *Engine {
	return &Engine{HTTPGuard: &files.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
}

func httpGraph(node string) string {
	return graph(`
  - id: h
    data: `+node+`
  - id: end
    data: {type: end, title: End, outputs: [{variable: status, value_selector: [h, status_code]}, {variable: body, value_selector: [h, body]},
      {variable: headers, value_selector: [h, headers]}, {variable: files, value_selector: [h, files]}]}`,
		edge("start", "source", "h"), edge("h", "source", "end"))
}

func TestHTTPRequestNode(t *testing.T) {
	srv := echoServer(t)
	tests := []struct {
		name  string
		node  string
		check map[string]string // field of the echoed JSON -> wanted value
	}{
		{
			name: "json body, templates, params, headers and bearer auth",
			node: `{type: http-request, title: H, method: post, url: '` + srv.URL + `/p/{{#start.q#}}',
      params: "a:1\nb:{{#start.q#}}", headers: "X-H: v-{{#start.q#}}",
      body: {type: json, data: [{type: text, value: '{"q": "{{#start.q#}}"}'}]},
      authorization: {type: api-key, config: {type: bearer, api_key: tok}}}`,
			check: map[string]string{"method": "POST", "path": "/p/hi", "query": "a=1&b=hi", "h": "v-hi",
				"auth": "Bearer tok", "ctype": "application/json", "body": `{"q": "hi"}`},
		},
		{
			name: "urlencoded body and custom header auth",
			node: `{type: http-request, title: H, method: PUT, url: '` + srv.URL + `/f',
      body: {type: x-www-form-urlencoded, data: [{key: k, type: text, value: '{{#start.q#}} there'}]},
      authorization: {type: api-key, config: {type: custom, header: X-Key, api_key: secret}}}`,
			check: map[string]string{"method": "PUT", "body": "k=hi+there", "key": "secret", "ctype": "application/x-www-form-urlencoded"},
		},
		{
			name: "raw text body and basic auth",
			node: `{type: http-request, title: H, method: patch, url: '` + srv.URL + `/r',
      body: {type: raw-text, data: [{type: text, value: 'plain {{#start.q#}}'}]},
      authorization: {type: api-key, config: {type: basic, api_key: 'u:p'}}}`,
			check: map[string]string{"method": "PATCH", "body": "plain hi", "auth": "Basic dTpw", "ctype": "text/plain"},
		},
		{
			name: "form-data body",
			node: `{type: http-request, title: H, method: post, url: '` + srv.URL + `/m',
      body: {type: form-data, data: [{key: field, type: text, value: '{{#start.q#}}'}]}}`,
			check: map[string]string{"method": "POST"},
		},
		{
			name:  "no body",
			node:  `{type: http-request, title: H, method: get, url: '` + srv.URL + `/g', body: {type: none, data: []}}`,
			check: map[string]string{"method": "GET", "body": ""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, rec := run1(t, localEngine(), RunInput{Workflow: graphYAML(t, httpGraph(tc.node)), Inputs: map[string]any{"q": "hi"}})
			if res.Status != RunSucceeded {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			checkOrder(t, rec)
			if res.Outputs["status"] != float64(201) {
				t.Errorf("status_code = %v", res.Outputs["status"])
			}
			if h := res.Outputs["headers"].(map[string]any); h["x-seen"] != "yes" {
				t.Errorf("headers = %v", h)
			}
			if f, _ := res.Outputs["files"].([]any); len(f) != 0 {
				t.Errorf("files = %v", f)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(res.Outputs["body"].(string)), &got); err != nil {
				t.Fatalf("body %q: %v", res.Outputs["body"], err)
			}
			for k, want := range tc.check {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
			if tc.name == "form-data body" {
				if !strings.HasPrefix(got["ctype"].(string), "multipart/form-data") || !strings.Contains(got["body"].(string), "name=\"field\"\r\n\r\nhi") {
					t.Errorf("form-data request: %v", got)
				}
			}
		})
	}
}

func TestHTTPRequestBinaryResponse(t *testing.T) {
	srv := echoServer(t)
	res, _ := run1(t, localEngine(), RunInput{Workflow: graphYAML(t, httpGraph(`{type: http-request, title: H, method: get, url: '`+srv.URL+`/bin'}`)), Inputs: map[string]any{"q": "hi"}})
	if res.Status != RunSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	if res.Outputs["body"] != "" {
		t.Errorf("body = %q", res.Outputs["body"])
	}
	fl, _ := res.Outputs["files"].([]any)
	if len(fl) != 1 {
		t.Fatalf("files = %v", res.Outputs["files"])
	}
	f := fl[0].(File)
	if f.MimeType != "image/png" || f.Size != 4 || f.Type != "image" || f.Filename != "bin.png" {
		t.Errorf("file = %+v", f)
	}
}

func TestHTTPRequestReadTimeout(t *testing.T) {
	srv := echoServer(t)
	start := time.Now()
	res, _ := run1(t, localEngine(), RunInput{Workflow: graphYAML(t, httpGraph(`{type: http-request, title: H, method: get, url: '`+srv.URL+`/slow',
      timeout: {connect: 1, read: 0.2, write: 0.2}}`)), Inputs: map[string]any{"q": "hi"}})
	if res.Status != RunFailed || !strings.Contains(res.Error, "timed out") {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("the timeout was not applied: %v", time.Since(start))
	}
}

// TestHTTPRequestGuard shows that without an allowlist the guard refuses a
// loopback address, as it refuses a metadata host name.
func TestHTTPRequestGuard(t *testing.T) {
	srv := echoServer(t)
	for _, u := range []string{srv.URL + "/g", "http://metadata.google.internal/x", "http://[::1]:1/"} {
		res, _ := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, httpGraph(`{type: http-request, title: H, method: get, url: '`+u+`'}`)), Inputs: map[string]any{"q": "hi"}})
		if res.Status != RunFailed || !strings.Contains(res.Error, "may not be requested") {
			t.Errorf("%s: status %s: %s", u, res.Status, res.Error)
		}
	}
	// A custom client is used as given.
	e := &Engine{HTTPClient: srv.Client()}
	res, _ := run1(t, e, RunInput{Workflow: graphYAML(t, httpGraph(`{type: http-request, title: H, method: get, url: '`+srv.URL+`/g'}`)), Inputs: map[string]any{"q": "hi"}})
	if res.Status != RunSucceeded {
		t.Errorf("with HTTPClient: %s %s", res.Status, res.Error)
	}
}

func TestHTTPRequestBadConfig(t *testing.T) {
	for node, want := range map[string]string{
		`{type: http-request, title: H, method: get, url: 'ftp://x/'}`:                                                          "not an http or https URL",
		`{type: http-request, title: H, method: get, url: 'http://x/', authorization: {type: api-key, config: {type: bearer}}}`: "API key is empty",
		`{type: http-request, title: H, method: TRACE, url: 'http://x/'}`:                                                       "not supported",
	} {
		res, _ := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, httpGraph(node)), Inputs: map[string]any{"q": "hi"}})
		if res.Status != RunFailed || !strings.Contains(res.Error, want) {
			t.Errorf("%s: %s %s", node, res.Status, res.Error)
		}
	}
}

func TestHTTPRequestFormDataFiles(t *testing.T) {
	srv := echoServer(t)
	node := `{type: http-request, title: H, method: post, url: '` + srv.URL + `/m',
      body: {type: form-data, data: [{key: note, type: text, value: '{{#start.q#}}'}, {key: upload, type: file, file: [sys, files]}]}}`
	remote := File{Identity: FileIdentity, Type: "image", TransferMethod: "remote_url", RemoteURL: srv.URL + "/bin", Filename: "pic.png", MimeType: "image/png"}
	res, _ := run1(t, localEngine(), RunInput{Workflow: graphYAML(t, httpGraph(node)), Inputs: map[string]any{"q": "hi"}, Files: []File{remote}})
	if res.Status != RunSucceeded {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(res.Outputs["body"].(string)), &got); err != nil {
		t.Fatal(err)
	}
	body := got["body"].(string)
	for _, want := range []string{"name=\"note\"\r\n\r\nhi", `name="upload"; filename="pic.png"`, "Content-Type: image/png"} {
		if !strings.Contains(body, want) {
			t.Errorf("multipart body lacks %q: %q", want, body)
		}
	}
	// An upload the engine cannot read fails the node, naming the file.
	local := File{Identity: FileIdentity, Type: "document", TransferMethod: "local_file", RelatedID: "0b1c", Filename: "a.pdf"}
	res, _ = run1(t, localEngine(), RunInput{Workflow: graphYAML(t, httpGraph(node)), Inputs: map[string]any{"q": "hi"}, Files: []File{local}})
	if res.Status != RunFailed || !strings.Contains(res.Error, `The file "a.pdf" cannot be read: this server keeps no uploaded files for workflows.`) {
		t.Errorf("status %s: %s", res.Status, res.Error)
	}
}

// TestHTTPRequestSharedTransports runs an http-request node in several runs
// (a new Engine each, as flows makes them) against a server that counts the
// connections it accepts. With shared transports the runs use one
// connection; without, each run dials its own. The guard and the node's
// read timeout hold either way.
func TestHTTPRequestSharedTransports(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	node := `{type: http-request, title: H, method: get, url: '` + srv.URL + `/x'}`

	tests := []struct {
		name       string
		transports *HTTPTransports
		wantConns  int
	}{
		{"a transport per request", nil, 3},
		{"shared transports", &HTTPTransports{}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			conns = 0
			mu.Unlock()
			guard := localEngine().HTTPGuard // one guard for all runs, as in flows
			for i := range 3 {
				e := &Engine{HTTPGuard: guard, Transports: tc.transports}
				res, _ := run1(t, e, RunInput{Workflow: graphYAML(t, httpGraph(node)), Inputs: map[string]any{"q": "hi"}})
				if res.Status != RunSucceeded || res.Outputs["body"] != "ok" {
					t.Fatalf("run %d: %s %s %v", i, res.Status, res.Error, res.Outputs)
				}
			}
			tc.transports.CloseIdle()
			mu.Lock()
			got := conns
			mu.Unlock()
			if got != tc.wantConns {
				t.Fatalf("%d connections for 3 runs, want %d", got, tc.wantConns)
			}

			// The guard still decides: without an allowlist, loopback is
			// refused even though a connection to it is open.
			e := &Engine{Transports: tc.transports}
			res, _ := run1(t, e, RunInput{Workflow: graphYAML(t, httpGraph(node)), Inputs: map[string]any{"q": "hi"}})
			if res.Status != RunFailed || !strings.Contains(res.Error, "may not be requested") {
				t.Fatalf("without an allowlist: %s %s", res.Status, res.Error)
			}
			// And so does the node's read timeout.
			e = &Engine{HTTPGuard: guard, Transports: tc.transports}
			start := time.Now()
			res, _ = run1(t, e, RunInput{Workflow: graphYAML(t, httpGraph(`{type: http-request, title: H, method: get, url: '`+srv.URL+`/slow',
      timeout: {connect: 1, read: 0.2, write: 0.2}}`)), Inputs: map[string]any{"q": "hi"}})
			if res.Status != RunFailed || !strings.Contains(res.Error, "timed out") || time.Since(start) > 2*time.Second {
				t.Fatalf("read timeout: %s %s after %v", res.Status, res.Error, time.Since(start))
			}
		})
	}
}
