// Package netguard keeps outgoing connections made on behalf of users (remote
// files, http-request nodes, tools, MCP servers, web pages) away from the
// server's own networks: loopback, private and link-local ranges, cloud
// metadata services and the like.
//
// Every address is checked where it matters: after the host name is resolved
// (all answers must pass, and only the checked addresses are dialled, so a
// second lookup cannot change the answer) and once more on the socket right
// before it connects. Redirects are checked the same way, since each one dials
// anew.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrBlocked is wrapped by every error about an address the guard refuses.
var ErrBlocked = errors.New("address not allowed")

// DefaultDialTimeout bounds one connection attempt when Guard.DialTimeout is zero.
const DefaultDialTimeout = 10 * time.Second

// Guard decides which addresses outgoing connections may reach. The zero
// Guard refuses every non-public address and is ready to use.
type Guard struct {
	// Allow lists ranges permitted although they would be refused otherwise
	// (127.0.0.1/32 in tests, an internal file server).
	Allow []netip.Prefix
	// LookupNetIP resolves host names; the system resolver when nil.
	LookupNetIP func(ctx context.Context, host string) ([]netip.Addr, error)
	// DialTimeout bounds one connection attempt; DefaultDialTimeout when zero.
	DialTimeout time.Duration
}

// refusedRanges are ranges netip's predicates do not already cover.
var refusedRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space; also a metadata service address
	netip.MustParsePrefix("192.0.0.0/24"),    // protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved and broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 (carries an IPv4 address)
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local NAT64
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001::/32"),       // Teredo (carries an IPv4 address)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4 (carries an IPv4 address)
	netip.MustParsePrefix("fec0::/10"),       // old site-local
}

// refusedHosts are metadata service names, refused whatever they resolve to.
var refusedHosts = map[string]bool{
	"metadata":                   true,
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
}

// Permitted reports whether a connection may go to addr.
func (g *Guard) Permitted(addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	if g != nil {
		for _, p := range g.Allow {
			if p.Contains(addr) {
				return true
			}
		}
	}
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsLoopback() || addr.IsPrivate() ||
		addr.IsLinkLocalUnicast() || addr.IsMulticast() || addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range refusedRanges {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// CheckHost refuses the metadata host names before anything is resolved.
func (g *Guard) CheckHost(host string) error {
	if refusedHosts[strings.TrimSuffix(strings.ToLower(host), ".")] {
		return refused(host, netip.Addr{})
	}
	return nil
}

// DialContext connects like net.Dialer.DialContext, but only to permitted
// addresses. It fits http.Transport.DialContext.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if err := g.CheckHost(host); err != nil {
		return nil, err
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if !g.Permitted(a) {
			return nil, refused(host, a)
		}
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", portText)
	}
	timeout := DefaultDialTimeout
	if g != nil && g.DialTimeout > 0 {
		timeout = g.DialTimeout
	}
	d := &net.Dialer{Timeout: timeout, Control: g.control}
	var lastErr error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	lookup := func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	if g != nil && g.LookupNetIP != nil {
		lookup = g.LookupNetIP
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s has no addresses", host)
	}
	return addrs, nil
}

// control checks the socket's address right before it connects.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q: %w", address, err)
	}
	if !g.Permitted(ap.Addr()) {
		return refused(ap.Addr().String(), ap.Addr())
	}
	return nil
}

func refused(host string, addr netip.Addr) error {
	if addr.IsValid() && addr.String() != host {
		return fmt.Errorf("%w: %s resolves to %s", ErrBlocked, host, addr)
	}
	return fmt.Errorf("%w: %s", ErrBlocked, host)
}

// ClientOptions shape a guarded HTTP client. Zero values take the defaults.
type ClientOptions struct {
	// Timeout bounds a whole request, body included; none when zero.
	Timeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response headers.
	ResponseHeaderTimeout time.Duration
	// MaxRedirects is how many redirects are followed: 5 when zero, none
	// when negative.
	MaxRedirects int
	// MaxIdleConns keeps that many idle connections for reuse; 1 when zero.
	MaxIdleConns int
}

// Client returns an HTTP client whose every connection, redirects included,
// goes through the guard, never through a proxy, and which follows only http
// and https redirects. Call CloseIdleConnections on it when done with a
// short-lived client.
func (g *Guard) Client(o ClientOptions) *http.Client {
	maxRedirects := o.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = 5
	}
	idle := o.MaxIdleConns
	if idle <= 0 {
		idle = 1
	}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would connect for us, unchecked
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		MaxIdleConns:          idle,
		MaxIdleConnsPerHost:   idle,
		IdleConnTimeout:       30 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   o.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if maxRedirects < 0 || len(via) > maxRedirects {
				return errors.New("too many redirects")
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return errors.New("redirected to a URL that is not http or https")
			}
			KeepCredentialsOnHost(req, via)
			return g.CheckHost(req.URL.Hostname())
		},
	}
}

// redirectSafeHeaders are the request headers that carry no credential;
// they are the only ones kept when a redirect leads to another host.
var redirectSafeHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true, "Cache-Control": true,
	"Content-Type": true, "Content-Language": true, "If-Match": true, "If-None-Match": true,
	"If-Modified-Since": true, "If-Unmodified-Since": true, "Pragma": true, "Range": true,
	"Referer": true, "User-Agent": true,
}

// KeepCredentialsOnHost is for the CheckRedirect of an http.Client: when
// a redirect leads to a host (or port, or from https to http) other than
// the first request's, it removes every header but a few that carry no
// credential. Go's client itself drops only Authorization, Cookie and
// WWW-Authenticate, and keeps them for subdomains; the API-key headers of
// OpenAPI tools and HTTP request nodes have names of their own.
func KeepCredentialsOnHost(req *http.Request, via []*http.Request) {
	if len(via) == 0 {
		return
	}
	first := via[0].URL
	if strings.EqualFold(req.URL.Host, first.Host) && (req.URL.Scheme == first.Scheme || req.URL.Scheme == "https") {
		return
	}
	for name := range req.Header {
		if !redirectSafeHeaders[http.CanonicalHeaderKey(name)] {
			req.Header.Del(name)
		}
	}
}
