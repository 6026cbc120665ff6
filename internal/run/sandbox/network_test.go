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
	"strings"
	"testing"

	"appkb/internal/platform/netguard"
)

// fetchCode fetches url with urllib, requests or httpx, which all honour the
// proxy variables, and reports the status or the failure instead of
// raising; then it tries a raw socket to the host's raw_port.
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
	tests := []struct {
		name    string
		network *netguard.Guard
		lib     string // urllib, requests or httpx
		url     string
		status  float64
		body    string // a part of the body
	}{
		{"allowed http goes through the guarded proxy", &netguard.Guard{Allow: loopback}, "urllib", plain.URL + "/a", 200, "hello from /a"},
		{"allowed https tunnels through CONNECT", &netguard.Guard{Allow: loopback}, "urllib", tlsSrv.URL + "/b", 200, "hello from /b"},
		{"requests over http", &netguard.Guard{Allow: loopback}, "requests", plain.URL + "/f", 200, "hello from /f"},
		{"requests over https", &netguard.Guard{Allow: loopback}, "requests", tlsSrv.URL + "/g", 200, "hello from /g"},
		{"httpx over https", &netguard.Guard{Allow: loopback}, "httpx", tlsSrv.URL + "/j", 200, "hello from /j"},
		{"httpx is refused as well", &netguard.Guard{}, "httpx", plain.URL + "/k", 403, "refused"},
		{"the guard refuses loopback http", &netguard.Guard{}, "urllib", plain.URL + "/c", 403, "refused"},
		{"the guard refuses loopback https", &netguard.Guard{}, "urllib", tlsSrv.URL + "/d", 0, "403"},
		{"requests is refused as well", &netguard.Guard{}, "requests", tlsSrv.URL + "/h", 0, "403"},
		{"without the opt-in nothing is reachable", nil, "urllib", plain.URL + "/e", 0, "URLError"},
		{"without the opt-in requests reaches nothing", nil, "requests", plain.URL + "/i", 0, "ConnectionError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPython(t, Config{Network: tc.network})
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
