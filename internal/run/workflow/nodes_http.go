package workflow

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"appkb/internal/conversation/files"
	"appkb/internal/platform/jsonnum"
	"appkb/internal/platform/netguard"
)

// Limits of the http-request node. The node data's timeouts are seconds;
// missing or non-positive values take the defaults, larger ones the caps.
const (
	httpDefaultConnect = 10 * time.Second
	httpDefaultRead    = 60 * time.Second
	httpDefaultWrite   = 20 * time.Second
	httpMaxConnect     = 30 * time.Second
	httpMaxRead        = 10 * time.Minute
	httpMaxWrite       = 10 * time.Minute
	// httpMaxBody bounds how much of a response the node reads.
	httpMaxBody = 10 << 20
	// httpMaxRedirects is how many redirects a request follows.
	httpMaxRedirects = 5
)

// httpClient gives the client of one request: Engine.HTTPClient when set;
// otherwise a client whose transport dials through the guard, shared with
// other requests and runs when Engine.Transports is set, made for this
// request alone when not. The second result releases what the request
// alone used.
func (e *Engine) httpClient(connect, read time.Duration) (*http.Client, func()) {
	if e.HTTPClient != nil {
		return e.HTTPClient, func() {}
	}
	g := e.HTTPGuard
	if g == nil {
		g = &files.Guard{}
	}
	release := func() {}
	tr := e.Transports.get(g, connect, read)
	if tr == nil {
		tr = newHTTPTransport(g, connect, read)
		tr.MaxIdleConns, tr.IdleConnTimeout = 1, time.Second
		release = tr.CloseIdleConnections
	}
	c := &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > httpMaxRedirects {
				return fmt.Errorf("too many redirects")
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirected to a URL that is not http or https")
			}
			// Credentials go to the host they were meant for only.
			netguard.KeepCredentialsOnHost(req, via)
			return nil
		},
	}
	return c, release
}

// newHTTPTransport dials through g and waits read for response headers.
func newHTTPTransport(g *files.Guard, connect, read time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // a proxy would connect for us, unchecked
		DialContext:           (&netguard.Guard{Allow: g.Allow, LookupNetIP: g.LookupNetIP, DialTimeout: connect}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   connect,
		ResponseHeaderTimeout: read,
	}
}

// HTTPTransports keeps the connections of http-request nodes open between
// requests and runs, so that calling the same API again costs no new TCP
// connection and TLS handshake (one round trip, where a fresh connection
// takes three). Connections are checked by the guard when they are dialled,
// so one that is reused goes to an address the guard let through. A
// transport is kept per guard (the same *files.Guard, as the runs of one
// service share) and pair of connect and read timeouts (nodes set their
// own), up to maxSharedTransports of them; requests beyond that get a
// transport of their own. Safe for concurrent use; nil shares nothing.
type HTTPTransports struct {
	mu sync.Mutex
	tr map[transportKey]*http.Transport
}

type transportKey struct {
	guard         *files.Guard
	connect, read time.Duration
}

// maxSharedTransports bounds the transports an HTTPTransports keeps.
const maxSharedTransports = 32

// get is the shared transport for these settings, or nil when t is nil or
// full.
func (t *HTTPTransports) get(g *files.Guard, connect, read time.Duration) *http.Transport {
	if t == nil {
		return nil
	}
	k := transportKey{g, connect, read}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr := t.tr[k]; tr != nil {
		return tr
	}
	if len(t.tr) >= maxSharedTransports {
		return nil
	}
	if t.tr == nil {
		t.tr = map[transportKey]*http.Transport{}
	}
	tr := newHTTPTransport(g, connect, read)
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.IdleConnTimeout = 64, 8, 90*time.Second
	t.tr[k] = tr
	return tr
}

// CloseIdle closes the connections no request is using.
func (t *HTTPTransports) CloseIdle() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tr := range t.tr {
		tr.CloseIdleConnections()
	}
}

// httpSeconds reads one timeout of the node data.
func httpSeconds(v any, def, max time.Duration) time.Duration {
	f, ok := jsonnum.Number(v)
	if !ok || f <= 0 {
		return def
	}
	d := time.Duration(f * float64(time.Second))
	if d > max {
		return max
	}
	return d
}

// parseKV reads the DSL's "key:value" lines (headers, params), rendering
// templates in keys and values. A line without a colon is a key with an
// empty value.
func parseKV(pool *Pool, text string) [][2]string {
	var out [][2]string
	for line := range strings.SplitSeq(pool.Render(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "" {
			continue
		}
		out = append(out, [2]string{k, v})
	}
	return out
}

// httpBody builds the request body and its content type.
func httpBody(x *nodeRun) (io.Reader, string, any, error) {
	var kind string
	var items []map[string]any
	switch b := x.d["body"].(type) {
	case map[string]any:
		kind = asString(b["type"])
		switch data := b["data"].(type) {
		case []any:
			items = asList2(data)
		case string: // an old body keeps its text in data
			items = []map[string]any{{"type": "text", "value": data}}
		}
	case string:
		// The oldest files store the raw body as a string.
		if b != "" {
			kind, items = "raw-text", []map[string]any{{"type": "text", "value": b}}
		}
	}
	first := func() string {
		if len(items) == 0 {
			return ""
		}
		return x.pool.Render(asString(items[0]["value"]))
	}
	switch kind {
	case "", "none":
		return nil, "", nil, nil
	case "json":
		s := first()
		return strings.NewReader(s), "application/json", s, nil
	case "raw-text":
		s := first()
		return strings.NewReader(s), "text/plain", s, nil
	case "x-www-form-urlencoded":
		form := url.Values{}
		for _, it := range items {
			if asString(it["type"]) == "file" {
				return nil, "", nil, nodeErr("HttpRequestNodeError", "Files cannot be sent in an x-www-form-urlencoded body.")
			}
			k := x.pool.Render(asString(it["key"]))
			if k != "" {
				form.Add(k, x.pool.Render(asString(it["value"])))
			}
		}
		s := form.Encode()
		return strings.NewReader(s), "application/x-www-form-urlencoded", s, nil
	case "form-data":
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		shown := map[string]any{}
		for _, it := range items {
			k := x.pool.Render(asString(it["key"]))
			if k == "" {
				continue
			}
			if asString(it["type"]) == "file" {
				names, err := x.writeFormFiles(w, k, it)
				if err != nil {
					return nil, "", nil, err
				}
				shown[k] = names
				continue
			}
			v := x.pool.Render(asString(it["value"]))
			if err := w.WriteField(k, v); err != nil {
				return nil, "", nil, err
			}
			shown[k] = v
		}
		if err := w.Close(); err != nil {
			return nil, "", nil, err
		}
		return &buf, w.FormDataContentType(), shown, nil
	case "binary":
		return nil, "", nil, nodeErr("NotSupported", "A binary request body is not supported yet.")
	}
	return nil, "", nil, nodeErr("HttpRequestNodeError", "Unknown body type %q.", kind)
}

// quoteEscaper escapes a quoted string of a Content-Disposition header.
var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

// httpMaxFormFile bounds one file sent in a form-data body.
const httpMaxFormFile = 15 << 20

// writeFormFiles adds the files a form-data item selects (its file
// selector, or value for older files) as parts named key. It gives their
// names, for the node's inputs.
func (x *nodeRun) writeFormFiles(w *multipart.Writer, key string, it map[string]any) (any, error) {
	sel := selectorOf(it["file"])
	if len(sel) == 0 {
		sel = selectorOf(it["value"])
	}
	v := x.get(sel)
	var list []any
	if l, ok := asList(v); ok {
		list = l
	} else if v != nil {
		list = []any{v}
	}
	var names []any
	for _, e := range list {
		f, ok := asFile(e)
		if !ok {
			return nil, nodeErr("HttpRequestNodeError", "The form-data field %q selects %s, which is not a file.", key, strings.Join(sel, "."))
		}
		name, mt, data, err := x.fileBytes(f)
		if err != nil {
			return nil, err
		}
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, quoteEscaper.Replace(key), quoteEscaper.Replace(name)))
		if mt == "" {
			mt = "application/octet-stream"
		}
		h.Set("Content-Type", mt)
		part, err := w.CreatePart(h)
		if err != nil {
			return nil, err
		}
		if _, err := part.Write(data); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// fileBytes reads a file value: an upload kept in Engine.Files, or a
// remote file fetched through the guard.
func (x *nodeRun) fileBytes(f File) (name, mimeType string, data []byte, err error) {
	label := fileLabel(f)
	fail := func(format string, args ...any) (string, string, []byte, error) {
		return "", "", nil, nodeErr("HttpRequestNodeError", "The file %q cannot be read: %s.", label, fmt.Sprintf(format, args...))
	}
	if f.TransferMethod == "remote_url" || (f.RelatedID == "" && f.ID == "" && (f.RemoteURL != "" || f.URL != "")) {
		raw := f.RemoteURL
		if raw == "" {
			raw = f.URL
		}
		g := x.r.e.HTTPGuard
		if g == nil {
			g = &files.Guard{}
		}
		rem, err := g.Open(x.ctx, raw)
		if err != nil {
			return fail("%v", err)
		}
		defer rem.Close()
		data, err := io.ReadAll(io.LimitReader(rem.Body, httpMaxFormFile+1))
		if err != nil {
			return fail("%v", err)
		}
		if len(data) > httpMaxFormFile {
			return fail("it is larger than %d bytes", httpMaxFormFile)
		}
		name = f.Filename
		if name == "" {
			name = rem.Name
		}
		mt := f.MimeType
		if mt == "" {
			mt = rem.MimeType
		}
		return name, mt, data, nil
	}
	store := x.r.e.Files
	if store == nil {
		return fail("this server keeps no uploaded files for workflows")
	}
	id := f.RelatedID
	if id == "" {
		id = f.ID
	}
	row, err := store.Get(x.ctx, id)
	if err != nil {
		return fail("%v", err)
	}
	if x.r.in.AppID != "" && row.AppID != nil && *row.AppID != x.r.in.AppID {
		return fail("it belongs to another app")
	}
	if row.Size > httpMaxFormFile {
		return fail("it is larger than %d bytes", httpMaxFormFile)
	}
	if data, err = store.ReadAll(x.ctx, row); err != nil {
		return fail("%v", err)
	}
	return row.Name, row.MimeType, data, nil
}

// runHTTPRequest sends one HTTP request through the SSRF-guarded client.
func runHTTPRequest(x *nodeRun) (*outcome, error) {
	method := strings.ToUpper(strings.TrimSpace(asString(x.d["method"])))
	if method == "" {
		method = http.MethodGet
	}
	switch method {
	case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS":
	default:
		return nil, nodeErr("HttpRequestNodeError", "The method %q is not supported.", method)
	}
	rawURL := strings.TrimSpace(x.pool.Render(asString(x.d["url"])))
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nodeErr("InvalidURLError", "%q is not an http or https URL.", rawURL)
	}
	q := u.Query()
	for _, kv := range parseKV(x.pool, asString(x.d["params"])) {
		q.Add(kv[0], kv[1])
	}
	u.RawQuery = q.Encode()

	body, contentType, shownBody, err := httpBody(x)
	if err != nil {
		return nil, err
	}
	to := asMap(x.d["timeout"])
	connect := httpSeconds(to["connect"], httpDefaultConnect, httpMaxConnect)
	read := httpSeconds(to["read"], httpDefaultRead, httpMaxRead)
	write := httpSeconds(to["write"], httpDefaultWrite, httpMaxWrite)
	// Go's client has no separate write timeout; the whole exchange is
	// bounded by the sum of the three.
	ctx, cancel := context.WithTimeout(x.ctx, connect+write+read)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, nodeErr("InvalidURLError", "%q is not a usable URL.", rawURL)
	}
	headers := map[string]any{}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for _, kv := range parseKV(x.pool, asString(x.d["headers"])) {
		req.Header.Set(kv[0], kv[1])
		headers[kv[0]] = kv[1]
	}
	if err := applyAuth(x, req); err != nil {
		return nil, err
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "appkb")
	}
	inputs := map[string]any{"method": method, "url": u.String(), "headers": headers}
	process := map[string]any{"request": fmt.Sprintf("%s %s", method, u.String())}
	if shownBody != nil {
		inputs["body"] = shownBody
	}

	client, release := x.r.e.httpClient(connect, read)
	defer release()
	res, err := client.Do(req)
	if err != nil {
		msg := err.Error()
		switch {
		case errors.Is(err, files.ErrBlockedAddress) || strings.Contains(msg, files.ErrBlockedAddress.Error()):
			return &outcome{inputs: inputs, process: process}, nodeErr("HttpRequestNodeError", "The URL %s points to an address that may not be requested.", rawURL)
		case x.ctx.Err() == nil && (ctx.Err() != nil || isTimeout(err)):
			return &outcome{inputs: inputs, process: process}, nodeErr("HttpRequestNodeError", "The request to %s timed out.", rawURL)
		}
		return &outcome{inputs: inputs, process: process}, nodeErr("HttpRequestNodeError", "The request to %s failed: %v", rawURL, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, httpMaxBody+1))
	if err != nil {
		return &outcome{inputs: inputs, process: process}, nodeErr("HttpRequestNodeError", "Reading the response of %s failed: %v", rawURL, err)
	}
	if len(data) > httpMaxBody {
		return &outcome{inputs: inputs, process: process}, nodeErr("ResponseSizeError", "The response of %s is larger than %d bytes.", rawURL, httpMaxBody)
	}
	respHeaders := map[string]any{}
	for k, vs := range res.Header {
		respHeaders[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	outputs := map[string]any{
		"status_code": float64(res.StatusCode),
		"body":        string(data),
		"headers":     respHeaders,
		"files":       []any{},
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if isBinaryType(mt, res.Header.Get("Content-Disposition")) && len(data) > 0 {
		// The response is a file. The engine has no file store, so the
		// file points back at the address it came from.
		outputs["body"] = ""
		outputs["files"] = []any{responseFile(res, mt, len(data))}
	}
	return &outcome{inputs: inputs, process: process, outputs: outputs}, nil
}

// applyAuth sets the authorization header of the api-key kind.
func applyAuth(x *nodeRun, req *http.Request) error {
	auth := asMap(x.d["authorization"])
	if auth == nil || asString(auth["type"]) == "" || asString(auth["type"]) == "no-auth" {
		return nil
	}
	if asString(auth["type"]) != "api-key" {
		return nodeErr("AuthorizationConfigError", "Unknown authorization type %q.", asString(auth["type"]))
	}
	cfg := asMap(auth["config"])
	key := x.pool.Render(asString(cfg["api_key"]))
	if key == "" {
		return nodeErr("AuthorizationConfigError", "The API key is empty.")
	}
	switch asString(cfg["type"]) {
	case "basic":
		// Dify sends the key as given; a key of the form user:password is
		// encoded the way Basic auth expects.
		if strings.Contains(key, ":") {
			key = base64.StdEncoding.EncodeToString([]byte(key))
		}
		req.Header.Set("Authorization", "Basic "+key)
	case "", "bearer":
		req.Header.Set("Authorization", "Bearer "+key)
	case "custom":
		h := strings.TrimSpace(x.pool.Render(asString(cfg["header"])))
		if h == "" {
			h = "Authorization"
		}
		req.Header.Set(h, key)
	default:
		return nodeErr("AuthorizationConfigError", "Unknown API key type %q.", asString(cfg["type"]))
	}
	return nil
}

// isBinaryType reports whether a response should become a file rather
// than text.
func isBinaryType(mt, disposition string) bool {
	if strings.HasPrefix(strings.ToLower(disposition), "attachment") {
		return true
	}
	switch {
	case mt == "", strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "json"), strings.HasSuffix(mt, "xml"),
		strings.Contains(mt, "javascript"), mt == "application/x-www-form-urlencoded", strings.HasSuffix(mt, "yaml"):
		return false
	}
	return true
}

func responseFile(res *http.Response, mt string, size int) File {
	name := ""
	if _, params, err := mime.ParseMediaType(res.Header.Get("Content-Disposition")); err == nil {
		name = path.Base(params["filename"])
	}
	if name == "" || name == "." || name == "/" {
		name = path.Base(res.Request.URL.Path)
	}
	if name == "" || name == "." || name == "/" {
		name = "file"
	}
	ext := path.Ext(name)
	if ext == "" {
		if exts, _ := mime.ExtensionsByType(mt); len(exts) > 0 {
			ext = exts[0]
			name += ext
		}
	}
	typ := "custom"
	switch {
	case strings.HasPrefix(mt, "image/"):
		typ = "image"
	case strings.HasPrefix(mt, "audio/"):
		typ = "audio"
	case strings.HasPrefix(mt, "video/"):
		typ = "video"
	case mt == "application/pdf":
		typ = "document"
	}
	return File{
		Identity: FileIdentity, Type: typ, TransferMethod: "remote_url",
		RemoteURL: res.Request.URL.String(), URL: res.Request.URL.String(),
		Filename: name, Extension: ext, MimeType: mt, Size: int64(size),
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
