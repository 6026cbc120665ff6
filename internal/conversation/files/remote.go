package files

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"time"

	"appkb/internal/platform/apperr"
	"appkb/internal/platform/netguard"
)

// Defaults of a Guard whose fields are left at zero.
const (
	DefaultFetchTimeout = 30 * time.Second
	DefaultMaxRedirects = 5
)

// ErrBlockedAddress is wrapped by errors for URLs whose host is, or
// resolves to, an address the guard refuses.
var ErrBlockedAddress = netguard.ErrBlocked

// Guard fetches remote files without letting a URL reach into the server's
// own networks. Every address a connection is about to use is checked —
// after name resolution, for each redirect, and once more on the socket
// itself — so a host name that resolves to a private address, or a
// redirect to one, is refused like a literal address would be. Refused are
// loopback, private, shared (carrier-grade NAT), link-local (where cloud
// metadata services live), unspecified, multicast, broadcast, reserved and
// documentation addresses, IPv6 transition prefixes that embed IPv4
// addresses, and the well-known metadata host names.
//
// The zero Guard is ready to use.
type Guard struct {
	// Allow lists address ranges that are permitted even though they would
	// be refused otherwise (for example 127.0.0.1/32 in tests, or an
	// internal file server).
	Allow []netip.Prefix
	// Timeout bounds a whole fetch, body included; DefaultFetchTimeout
	// when zero.
	Timeout time.Duration
	// MaxRedirects is how many redirects are followed; DefaultMaxRedirects
	// when zero, none when negative.
	MaxRedirects int
	// LookupNetIP resolves host names; the system resolver when nil.
	LookupNetIP func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Permitted reports whether the guard lets a connection go to addr.
func (g *Guard) Permitted(addr netip.Addr) bool { return g.net().Permitted(addr) }

// net is the connection guard these settings describe.
func (g *Guard) net() *netguard.Guard {
	return &netguard.Guard{Allow: g.Allow, LookupNetIP: g.LookupNetIP}
}

// Remote is a response being fetched. The caller closes Body.
type Remote struct {
	// URL is the address the content came from, after redirects.
	URL *url.URL
	// Name is the file name the server gave, or the last segment of the
	// URL's path, or "file".
	Name string
	// MimeType is the response's media type without parameters; it may be
	// empty.
	MimeType string
	// ContentLength is -1 when unknown.
	ContentLength int64
	Body          io.ReadCloser
	cancel        context.CancelFunc
	client        *http.Client
}

// Close ends the fetch.
func (r *Remote) Close() error {
	err := r.Body.Close()
	r.cancel()
	r.client.CloseIdleConnections()
	return err
}

// Open starts fetching rawURL (http or https) with a GET. Failures are
// 400 invalid_param errors whose message says what went wrong; a refused
// address also wraps ErrBlockedAddress. The timeout keeps running while the
// body is read.
func (g *Guard) Open(ctx context.Context, rawURL string) (*Remote, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, apperr.InvalidParam("%q is not an http or https URL.", rawURL)
	}
	ng := g.net()
	if err := ng.CheckHost(u.Hostname()); err != nil {
		return nil, fetchError(rawURL, err)
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = DefaultFetchTimeout
	}
	maxRedirects := g.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = DefaultMaxRedirects
	}
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would make the connection for us, unchecked
		DialContext:           ng.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          1,
		IdleConnTimeout:       time.Second,
	}
	client := &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return apperr.InvalidParam("Fetching %s: too many redirects.", rawURL)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return apperr.InvalidParam("Fetching %s: redirected to a URL that is not http or https.", rawURL)
			}
			return ng.CheckHost(req.URL.Hostname())
		},
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		cancel()
		return nil, apperr.InvalidParam("%q is not a usable URL.", rawURL)
	}
	req.Header.Set("User-Agent", "appkb")
	res, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, fetchError(rawURL, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		res.Body.Close()
		cancel()
		return nil, apperr.InvalidParam("Fetching %s failed with HTTP status %d.", rawURL, res.StatusCode)
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	return &Remote{
		URL:           res.Request.URL,
		Name:          remoteName(res),
		MimeType:      mt,
		ContentLength: res.ContentLength,
		Body:          res.Body,
		cancel:        cancel,
		client:        client,
	}, nil
}

// fetchError turns a failed request into the API error.
func fetchError(rawURL string, err error) error {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, ErrBlockedAddress) {
		return apperr.FailWith(err, apperr.CodeInvalidParam,
			"The URL %s points to an address that may not be fetched.", rawURL)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return apperr.FailWith(err, apperr.CodeInvalidParam, "Fetching %s timed out.", rawURL)
	}
	return apperr.FailWith(err, apperr.CodeInvalidParam, "Fetching %s failed.", rawURL)
}

// remoteName picks a file name for a fetched response.
func remoteName(res *http.Response) string {
	if _, params, err := mime.ParseMediaType(res.Header.Get("Content-Disposition")); err == nil {
		if n := safeName(params["filename"]); n != "" {
			return n
		}
	}
	if n := safeName(path.Base(res.Request.URL.Path)); n != "" && n != "." && n != "/" {
		return n
	}
	return "file"
}

// safeName keeps the last path segment of a name and drops characters
// that a stored name may not have.
func safeName(name string) string {
	name = strings.TrimSpace(name)
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, name)
	return strings.TrimSpace(name)
}
