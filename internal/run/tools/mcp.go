package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"appkb/internal/platform/netguard"
)

// MCPServer is an MCP server tools are called on.
type MCPServer struct {
	// Name identifies the server in tool keys and errors.
	Name string
	URL  string
	// Transport is TransportStreamable (default) or TransportSSE.
	Transport string
	Headers   map[string]string
	// Timeout bounds connecting plus one call; DefaultTimeout when zero.
	Timeout time.Duration
}

func (s MCPServer) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultTimeout
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}

// mcpImplementation is how appkb introduces itself to MCP servers.
var mcpImplementation = &mcp.Implementation{Name: "appkb", Version: "1"}

// mcpConn is a session with a server; tooLarge counts its answers that
// went over MaxAnswerBytes (the SDK reports those only as a broken
// response or a closed connection).
type mcpConn struct {
	*mcp.ClientSession
	tooLarge *atomic.Int64
}

// mcpSessionFunc gives the session a call goes over and its release,
// told whether the call left the session unusable.
type mcpSessionFunc func(context.Context) (*mcpConn, func(broken bool), error)

// connect opens a session with the server; the caller closes it. The
// client goes through guard, and its context bounds the whole session.
func (s MCPServer) connect(ctx context.Context, guard *netguard.Guard) (*mcpConn, error) {
	// The SDK waits for the answer to each request it sends, whatever
	// becomes of the call's context (a silent server held a call until it
	// gave up itself): each exchange is bounded here instead.
	hc := guard.Client(netguard.ClientOptions{MaxRedirects: -1, ResponseHeaderTimeout: s.timeout()})
	// No answer may be longer than MaxAnswerBytes: the SDK would read a
	// huge answer whole into memory (and the run then stores its text).
	// The limit holds for each answer, so an SSE session, whose one stream
	// carries the answers of all its calls, serves any number of them.
	tooLarge := new(atomic.Int64)
	hc.Transport = &headerTransport{base: limitAnswers{base: hc.Transport, tripped: tooLarge}, headers: s.Headers}
	var tr mcp.Transport
	switch s.Transport {
	case TransportSSE:
		tr = &mcp.SSEClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxEventSize: maxEventSize}
	default:
		tr = &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true, MaxEventSize: maxEventSize}
	}
	client := mcp.NewClient(mcpImplementation, nil)
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		return nil, mcpError(ctx, s, err)
	}
	return &mcpConn{ClientSession: cs, tooLarge: tooLarge}, nil
}

// maxEventSize is the SDK's own bound on one event it buffers, kept just
// above ours (limitAnswers), which trips first and is reported clearly.
const maxEventSize = MaxAnswerBytes + 64<<10

// mcpError words a failure to reach a server.
func mcpError(ctx context.Context, s MCPServer, err error) error {
	switch {
	case errors.Is(err, netguard.ErrBlocked) || strings.Contains(err.Error(), netguard.ErrBlocked.Error()):
		return fmt.Errorf("the MCP server %s is at an address that may not be reached (see --fetch-allow)", s.URL)
	case expired(ctx):
		return fmt.Errorf("the MCP server %s did not answer within %s", s.URL, s.timeout())
	}
	return fmt.Errorf("the MCP server %s cannot be reached: %v", s.URL, err)
}

// expired says whether ctx's deadline has passed. It reads the clock rather
// than ctx.Err(): the transport's own wait for headers, as long as the
// call's, can give up just before the context's timer has run, and the
// caller should still hear that the server was too slow.
func expired(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && !time.Now().Before(deadline)
}

// ListMCP connects to an MCP server and gives its tools, ready to call.
// Each call of those tools opens a session of its own, so that a server
// restarted between calls does no harm.
func ListMCP(ctx context.Context, s MCPServer, guard *netguard.Guard) ([]*Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	cs, err := s.connect(ctx, guard)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	return s.listTools(ctx, cs, func(ctx context.Context) (*mcpConn, func(bool), error) {
		cs, err := s.connect(ctx, guard)
		if err != nil {
			return nil, nil, err
		}
		return cs, func(bool) { cs.Close() }, nil
	})
}

// MCPSession is a session with an MCP server kept open for several calls.
// A call that leaves it unusable (an answer over MaxAnswerBytes ends an
// SSE stream, say) makes the next call open a new one.
type MCPSession struct {
	s     MCPServer
	guard *netguard.Guard
	// ctx bounds every session opened; cancel ends them.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	cs     *mcpConn // nil after a broken call until the next opens one
}

// session is the mcpSessionFunc of the tools of m.
func (m *MCPSession) session(context.Context) (*mcpConn, func(bool), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cs == nil {
		if err := m.ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("the session with the MCP server %s is closed", m.s.URL)
		}
		// The new session lives as long as m, but its handshake is
		// bounded by the server's timeout, as OpenMCP's was.
		cctx, cancel := context.WithCancel(m.ctx)
		late := time.AfterFunc(m.s.timeout(), cancel)
		cs, err := m.s.connect(cctx, m.guard)
		if !late.Stop() {
			err = fmt.Errorf("the MCP server %s did not answer within %s", m.s.URL, m.s.timeout())
		}
		if err != nil {
			if cs != nil {
				cs.Close()
			}
			cancel()
			return nil, nil, err
		}
		m.cs = cs
	}
	cs := m.cs
	return cs, func(broken bool) {
		if !broken {
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.cs == cs {
			cs.Close()
			m.cs = nil
		}
	}, nil
}

// OpenMCP connects to an MCP server and lists its tools, which call the
// server over this one session until Close: one handshake for the list and
// every call, where ListMCP's tools make one per call. Connecting and
// listing are bounded by the server's timeout, and so is each call; the
// session ends with ctx at the latest.
func OpenMCP(ctx context.Context, s MCPServer, guard *netguard.Guard) (*MCPSession, []*Tool, error) {
	sctx, cancel := context.WithCancel(ctx)
	late := time.AfterFunc(s.timeout(), cancel)
	cs, err := s.connect(sctx, guard)
	m := &MCPSession{s: s, guard: guard, ctx: sctx, cancel: cancel, cs: cs}
	var list []*Tool
	if err == nil {
		list, err = s.listTools(sctx, cs, m.session)
	}
	if !late.Stop() {
		// The time is up and sctx cancelled, whatever came of it.
		err = fmt.Errorf("the MCP server %s did not answer within %s", s.URL, s.timeout())
	}
	if err != nil {
		if cs != nil {
			cs.Close()
		}
		cancel()
		return nil, nil, err
	}
	return m, list, nil
}

// Close ends the session.
func (m *MCPSession) Close() {
	m.mu.Lock()
	if m.cs != nil {
		m.cs.Close()
		m.cs = nil
	}
	m.mu.Unlock()
	m.cancel()
}

// listTools lists the tools of the server over cs; each tool calls it over
// the session session gives, then releases that session.
func (s MCPServer) listTools(ctx context.Context, cs *mcpConn, session mcpSessionFunc) ([]*Tool, error) {
	var out []*Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, mcpError(ctx, s, err)
		}
		out = append(out, s.tool(t, session))
	}
	return out, nil
}

// tool wraps one tool of the server, called over the session session gives.
func (s MCPServer) tool(t *mcp.Tool, session mcpSessionFunc) *Tool {
	schema := map[string]any{"type": "object", "properties": map[string]any{}}
	if data, err := json.Marshal(t.InputSchema); err == nil {
		var m map[string]any
		if json.Unmarshal(data, &m) == nil && m != nil {
			schema = m
		}
	}
	label := t.Title
	if label == "" && t.Annotations != nil {
		label = t.Annotations.Title
	}
	if label == "" {
		label = t.Name
	}
	name := t.Name
	return &Tool{
		Provider: s.Name, Name: name, Label: label, Description: t.Description, InputSchema: schema,
		Run: func(ctx context.Context, _ *Env, args map[string]any) (*Output, error) {
			ctx, cancel := context.WithTimeout(ctx, s.timeout())
			defer cancel()
			cs, release, err := session(ctx)
			if err != nil {
				return nil, err
			}
			// Answers refused before this call are not this call's.
			refused := cs.tooLarge.Load()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			tooLarge := cs.tooLarge.Load() > refused
			release(err != nil && (tooLarge || closedConn(err)))
			if err != nil {
				if expired(ctx) {
					return nil, fmt.Errorf("the MCP tool %s did not answer within %s", name, s.timeout())
				}
				if tooLarge {
					return nil, fmt.Errorf("the MCP tool %s failed: its answer is larger than %d bytes", name, MaxAnswerBytes)
				}
				return nil, fmt.Errorf("the MCP tool %s failed: %v", name, err)
			}
			out := mcpOutput(res)
			if res.IsError {
				return nil, fmt.Errorf("the MCP tool %s reported an error: %s", name, strings.TrimSpace(out.Text))
			}
			return out, nil
		},
	}
}

// closedConn says whether err tells that the session's connection is
// gone, so that a kept session must be opened anew.
func closedConn(err error) bool {
	if errors.Is(err, mcp.ErrConnectionClosed) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection closed") || strings.Contains(msg, "closing") || strings.Contains(msg, "EOF")
}

// mcpOutput turns a call's content into an Output: text parts become the
// text, structured content the json, images, audio and embedded blobs
// files.
func mcpOutput(res *mcp.CallToolResult) *Output {
	out := &Output{}
	var texts []string
	for i, c := range res.Content {
		switch x := c.(type) {
		case *mcp.TextContent:
			texts = append(texts, x.Text)
		case *mcp.ImageContent:
			out.Files = append(out.Files, File{Name: fmt.Sprintf("image-%d%s", i+1, extFor(x.MIMEType)), MimeType: x.MIMEType, Data: x.Data})
		case *mcp.AudioContent:
			out.Files = append(out.Files, File{Name: fmt.Sprintf("audio-%d%s", i+1, extFor(x.MIMEType)), MimeType: x.MIMEType, Data: x.Data})
		case *mcp.EmbeddedResource:
			if r := x.Resource; r != nil {
				if r.Text != "" {
					texts = append(texts, r.Text)
				} else if len(r.Blob) > 0 {
					out.Files = append(out.Files, File{Name: resourceName(r.URI, i), MimeType: r.MIMEType, Data: r.Blob})
				}
			}
		case *mcp.ResourceLink:
			texts = append(texts, x.URI)
		}
	}
	out.Text = strings.Join(texts, "\n")
	jsonBytes := 0
	if res.StructuredContent != nil {
		if data, err := json.Marshal(res.StructuredContent); err == nil {
			jsonBytes = len(data)
			var v any
			if json.Unmarshal(data, &v) == nil {
				if m, ok := v.(map[string]any); ok {
					out.JSON = []any{m}
				}
				if out.Text == "" {
					out.Text = string(data)
				}
			}
		}
	}
	return capOutput(out, jsonBytes)
}

func extFor(mimeType string) string {
	if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
		return exts[0]
	}
	return ""
}

func resourceName(uri string, i int) string {
	if j := strings.LastIndexByte(uri, '/'); j >= 0 && j+1 < len(uri) {
		return uri[j+1:]
	}
	return fmt.Sprintf("resource-%d", i+1)
}
