package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"

	"appkb/internal/platform/netguard"
)

// fetchCode fetches url with urllib, requests or httpx, which all honour the
// proxy variables, and reports the status or the failure instead of
// raising; then it tries a raw socket to the host's raw_port.
// requests-verify fetches with certificate checks on; ca-bundle only looks
// at the CA certificates requests and ssl would use (200 when both find
// some).
const fetchCode = `
import os, socket, ssl, urllib.error, urllib.request

def main(url: str, raw_port: int, lib: str) -> dict:
    out = {"proxy": os.environ.get("HTTPS_PROXY", "")}
    try:
        if lib == "requests":
            import requests, urllib3
            urllib3.disable_warnings()
            r = requests.get(url, timeout=5, verify=False)
            out["status"] = r.status_code
            out["body"] = r.text
        elif lib == "requests-verify":
            import requests
            r = requests.get(url, timeout=5)
            out["status"] = r.status_code
            out["body"] = r.text
        elif lib == "ca-bundle":
            import requests.utils
            with open(requests.utils.DEFAULT_CA_BUNDLE_PATH, "rb") as f:
                bundle = f.read().count(b"BEGIN CERTIFICATE")
            store = ssl.create_default_context().cert_store_stats()["x509_ca"]
            out["status"] = 200 if bundle > 0 and store > 0 else 500
            out["body"] = "bundle %d, default store %d" % (bundle, store)
        elif lib == "httpx":
            import httpx
            r = httpx.get(url, timeout=5, verify=False)
            out["status"] = r.status_code
            out["body"] = r.text
        else:
            ctx = ssl._create_unverified_context()
            with urllib.request.urlopen(url, timeout=5, context=ctx) as r:
                out["status"] = r.status
                out["body"] = r.read().decode()
    except urllib.error.HTTPError as e:
        out["status"] = e.code
        out["body"] = e.read().decode()
    except Exception as e:
        out["status"] = 0
        out["body"] = "%s: %s" % (type(e).__name__, e)
    try:
        socket.create_connection(("127.0.0.1", raw_port), timeout=2).close()
        out["raw"] = "connected"
    except OSError as e:
        out["raw"] = type(e).__name__
    return out
`

func TestNetwork(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(handler)
	defer tlsSrv.Close()
	port := func(s *httptest.Server) int {
		u, _ := url.Parse(s.URL)
		return int(netip.MustParseAddrPort(u.Host).Port())
	}(plain)

	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	_, caErr := os.Stat("/etc/ssl/certs/ca-certificates.crt")
	tests := []struct {
		name     string
		network  *netguard.Guard
		lib      string // urllib, requests, httpx, requests-verify or ca-bundle
		url      string
		status   float64
		body     string // a part of the body
		rlimits  bool   // no cgroup, rlimits alone
		needsCAs bool   // needs the host's CA bundle (Debian's ca-certificates)
	}{
		{name: "allowed http goes through the guarded proxy", network: &netguard.Guard{Allow: loopback}, lib: "urllib", url: plain.URL + "/a", status: 200, body: "hello from /a"},
		{name: "allowed https tunnels through CONNECT", network: &netguard.Guard{Allow: loopback}, lib: "urllib", url: tlsSrv.URL + "/b", status: 200, body: "hello from /b"},
		{name: "requests over http", network: &netguard.Guard{Allow: loopback}, lib: "requests", url: plain.URL + "/f", status: 200, body: "hello from /f"},
		{name: "requests over https", network: &netguard.Guard{Allow: loopback}, lib: "requests", url: tlsSrv.URL + "/g", status: 200, body: "hello from /g"},
		{name: "httpx over https", network: &netguard.Guard{Allow: loopback}, lib: "httpx", url: tlsSrv.URL + "/j", status: 200, body: "hello from /j"},
		{name: "httpx over https under rlimits alone", network: &netguard.Guard{Allow: loopback}, lib: "httpx", url: tlsSrv.URL + "/l", status: 200, body: "hello from /l", rlimits: true},
		{name: "requests finds the host's CA bundle", network: &netguard.Guard{Allow: loopback}, lib: "ca-bundle", url: tlsSrv.URL, status: 200, body: "bundle", needsCAs: true},
		// The test server's certificate is its own: verification runs and
		// fails on it, rather than failing to find any CA bundle.
		{name: "requests verifies https against that bundle", network: &netguard.Guard{Allow: loopback}, lib: "requests-verify", url: tlsSrv.URL + "/m", status: 0, body: "CERTIFICATE_VERIFY_FAILED", needsCAs: true},
		{name: "httpx is refused as well", network: &netguard.Guard{}, lib: "httpx", url: plain.URL + "/k", status: 403, body: "refused"},
		{name: "the guard refuses loopback http", network: &netguard.Guard{}, lib: "urllib", url: plain.URL + "/c", status: 403, body: "refused"},
		{name: "the guard refuses loopback https", network: &netguard.Guard{}, lib: "urllib", url: tlsSrv.URL + "/d", status: 0, body: "403"},
		{name: "requests is refused as well", network: &netguard.Guard{}, lib: "requests", url: tlsSrv.URL + "/h", status: 0, body: "403"},
		{name: "without the opt-in nothing is reachable", network: nil, lib: "urllib", url: plain.URL + "/e", status: 0, body: "URLError"},
		{name: "without the opt-in requests reaches nothing", network: nil, lib: "requests", url: plain.URL + "/i", status: 0, body: "ConnectionError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needsCAs && caErr != nil {
				t.Skipf("the host has no CA bundle (install ca-certificates): %v", caErr)
			}
			p := newPython(t, Config{Network: tc.network, noCgroup: tc.rlimits})
			out, err := p.Run(context.Background(), fetchCode, map[string]any{"url": tc.url, "raw_port": port, "lib": tc.lib})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if out["status"] != tc.status || !strings.Contains(fmt.Sprint(out["body"]), tc.body) {
				t.Errorf("got status %v body %q, want %v and %q", out["status"], out["body"], tc.status, tc.body)
			}
			// The sandbox's loopback is its own: a raw socket never reaches the host.
			if out["raw"] == "connected" {
				t.Errorf("a raw socket reached the host's port %d", port)
			}
			if (tc.network != nil) != (out["proxy"] != "") {
				t.Errorf("HTTPS_PROXY = %q with network %v", out["proxy"], tc.network != nil)
			}
		})
	}
}

// TestProxyRequests talks to the proxy directly, as the relay in the
// sandbox does.
func TestProxyRequests(t *testing.T) {
	p, err := startProxy(&netguard.Guard{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	tests := []struct {
		name    string
		request string
		status  string
	}{
		{"CONNECT to loopback", "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n", "403"},
		{"CONNECT to a metadata name", "CONNECT metadata.google.internal:80 HTTP/1.1\r\nHost: metadata.google.internal:80\r\n\r\n", "403"},
		{"CONNECT to a private address", "CONNECT 10.1.2.3:443 HTTP/1.1\r\nHost: 10.1.2.3:443\r\n\r\n", "403"},
		{"absolute http to a link-local address", "GET http://169.254.169.254/latest HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n", "403"},
		{"a request that is not for a proxy", "GET /x HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n", "400"},
		{"an absolute URL of another scheme", "GET ftp://example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n", "400"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("unix", p.path)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte(tc.request)); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(line, "HTTP/1.1 "+tc.status+" ") {
				t.Errorf("answer %q, want status %s", line, tc.status)
			}
		})
	}
}
