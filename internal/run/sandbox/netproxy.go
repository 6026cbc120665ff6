package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"sync"
	"time"

	"appkb/internal/platform/netguard"
)

// proxySocket is where a run with network access finds the proxy: a unix
// socket bound into the sandbox at this path.
const proxySocket = "/run/appkb/proxy.sock"

// proxyDirPrefix names the private directories of the proxies' sockets
// in the temporary directory: appkb-net-<server pid>-<random>.
const proxyDirPrefix = "appkb-net-"

// netProxy is the HTTP forward proxy one sandboxed run reaches the network
// through. The sandbox keeps its own empty network namespace, so the unix
// socket is its only way out, and every connection the proxy opens is dialled
// by the SSRF guard: code can reach exactly what the guard permits. It speaks
// CONNECT (https and any other TCP stream) and absolute-URI requests (plain
// http).
type netProxy struct {
	dir  string // private directory holding the socket
	path string // the socket on the host
	ln   net.Listener
	srv  *http.Server
	tr   *http.Transport

	mu     sync.Mutex
	tunnel map[net.Conn]struct{} // hijacked connections, closed by close
	closed bool
}

// startProxy listens on a fresh unix socket; owner, when not nil, becomes
// the owner of the socket and its directory (the sandbox's host user).
func startProxy(guard *netguard.Guard, owner *int) (*netProxy, error) {
	// The server's pid in the name lets a later server remove what this
	// one leaves if it is killed (see sweepProxyDirs).
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", proxyDirPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("the network proxy for code could not be set up: %w", err)
	}
	p := &netProxy{dir: dir, path: filepath.Join(dir, "proxy.sock"), tunnel: map[net.Conn]struct{}{}}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the network proxy for code could not listen: %w", err)
	}
	p.ln = ln
	if owner != nil {
		for _, f := range []string{dir, p.path} {
			if err := os.Chown(f, *owner, *owner); err != nil {
				ln.Close()
				os.RemoveAll(dir)
				return nil, fmt.Errorf("the network proxy for code could not be set up: %w", err)
			}
		}
	}
	p.tr = &http.Transport{
		Proxy:                 nil, // never another proxy: it would connect unchecked
		DialContext:           guard.DialContext,
		ResponseHeaderTimeout: time.Minute,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
	}
	fwd := &httputil.ReverseProxy{
		// The request already carries the absolute URL it wants; only the
		// hop-by-hop and forwarding headers ReverseProxy drops change.
		Rewrite:   func(*httputil.ProxyRequest) {},
		Transport: p.tr,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			refuse(w, err)
		},
		ErrorLog: slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, guard, fwd) }),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
	}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				slog.Error("the network proxy for code panicked", "panic", v)
			}
		}()
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

func (p *netProxy) serve(w http.ResponseWriter, r *http.Request, guard *netguard.Guard, fwd *httputil.ReverseProxy) {
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r, guard)
	case r.URL.IsAbs() && r.URL.Scheme == "http" && r.URL.Host != "":
		fwd.ServeHTTP(w, r)
	default:
		http.Error(w, "this proxy forwards CONNECT and absolute http:// requests only", http.StatusBadRequest)
	}
}

// connect opens a guarded TCP connection to the CONNECT target and relays
// bytes both ways until either side is done.
func (p *netProxy) connect(w http.ResponseWriter, r *http.Request, guard *netguard.Guard) {
	up, err := guard.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		refuse(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "CONNECT is not possible on this connection", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !p.track(down) {
		up.Close()
		down.Close()
		return
	}
	defer p.untrack(down)
	defer up.Close()
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst net.Conn, src io.Reader) {
		defer func() {
			if v := recover(); v != nil {
				slog.Error("the network proxy for code panicked", "panic", v)
			}
			done <- struct{}{}
		}()
		_, _ = io.Copy(dst, src)
		if c, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = c.CloseWrite()
		}
	}
	// Bytes the client sent right after its CONNECT may wait in buf.
	go pipe(up, buf.Reader)
	go pipe(down, up)
	<-done
	<-done
}

// refuse answers a failed dial: 403 when the guard refused the address.
func refuse(w http.ResponseWriter, err error) {
	if errors.Is(err, netguard.ErrBlocked) {
		http.Error(w, "appkb refused the connection: "+err.Error(), http.StatusForbidden)
		return
	}
	http.Error(w, "appkb could not connect: "+err.Error(), http.StatusBadGateway)
}

func (p *netProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.tunnel[c] = struct{}{}
	return true
}

func (p *netProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.tunnel, c)
	p.mu.Unlock()
	c.Close()
}

// close stops the proxy, cuts its tunnels and removes the socket.
func (p *netProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnel {
		c.Close()
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		p.srv.Close()
	}
	p.tr.CloseIdleConnections()
	os.RemoveAll(p.dir)
}
