package netguard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
)

func TestPermitted(t *testing.T) {
	loop := netip.MustParsePrefix("127.0.0.1/32")
	tests := []struct {
		addr  string
		allow []netip.Prefix
		want  bool
	}{
		{"93.184.216.34", nil, true},
		{"2606:4700::1111", nil, true},
		{"127.0.0.1", nil, false},
		{"127.0.0.1", []netip.Prefix{loop}, true},
		{"127.0.0.2", []netip.Prefix{loop}, false},
		{"10.1.2.3", nil, false},
		{"172.16.0.1", nil, false},
		{"192.168.1.1", nil, false},
		{"169.254.169.254", nil, false},
		{"100.100.100.200", nil, false},
		{"0.0.0.0", nil, false},
		{"::1", nil, false},
		{"::ffff:127.0.0.1", nil, false},
		{"fe80::1", nil, false},
		{"fd00::1", nil, false},
		{"64:ff9b::a00:1", nil, false},
		{"2002:a00:1::", nil, false},
		{"224.0.0.1", nil, false},
		{"255.255.255.255", nil, false},
	}
	for _, tc := range tests {
		g := &Guard{Allow: tc.allow}
		if got := g.Permitted(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Permitted(%s, allow %v) = %v, want %v", tc.addr, tc.allow, got, tc.want)
		}
	}
	var nilGuard *Guard
	if nilGuard.Permitted(netip.MustParseAddr("127.0.0.1")) {
		t.Error("a nil guard permitted loopback")
	}
}

func TestCheckHost(t *testing.T) {
	for host, blocked := range map[string]bool{
		"metadata.google.internal.": true, "Metadata": true, "instance-data": true, "example.com": false,
	} {
		err := (&Guard{}).CheckHost(host)
		if got := errors.Is(err, ErrBlocked); got != blocked {
			t.Errorf("CheckHost(%q) = %v, want blocked %v", host, err, blocked)
		}
	}
}

func TestClient(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hop" {
			http.Redirect(w, r, "http://metadata.google.internal/", http.StatusFound)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer target.Close()
	// A resolver that maps a public-looking name onto loopback: the guard
	// must judge the resolved address, not the name.
	sneaky := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	_, port, _ := splitPort(target.URL)
	tests := []struct {
		name    string
		guard   *Guard
		url     string
		blocked bool
	}{
		{"loopback refused", &Guard{}, target.URL, true},
		{"name resolving to loopback refused", &Guard{LookupNetIP: sneaky}, "http://public.example:" + port + "/", true},
		{"allowed range", &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, target.URL, false},
		{"redirect to metadata refused", &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, target.URL + "/hop", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.guard.Client(ClientOptions{})
			defer c.CloseIdleConnections()
			res, err := c.Get(tc.url)
			if err == nil {
				res.Body.Close()
			}
			if got := errors.Is(err, ErrBlocked); got != tc.blocked {
				t.Fatalf("Get(%s): err %v, want blocked %v", tc.url, err, tc.blocked)
			}
			if !tc.blocked && res.StatusCode != 200 {
				t.Fatalf("status %d", res.StatusCode)
			}
		})
	}
}

func splitPort(raw string) (string, string, error) {
	u, err := netip.ParseAddrPort(raw[len("http://"):])
	if err != nil {
		return "", "", err
	}
	return u.Addr().String(), strconv.Itoa(int(u.Port())), nil
}

// A redirect to another host (here another port) loses every credential
// header, custom API-key headers too; one to the same host keeps them.
func TestRedirectDropsCredentialsOnHostChange(t *testing.T) {
	var got http.Header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer other.Close()
	var origin *httptest.Server
	origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/landed", http.StatusFound)
		case "/here":
			http.Redirect(w, r, origin.URL+"/same", http.StatusFound)
		default:
			got = r.Header.Clone()
		}
	}))
	defer origin.Close()
	g := &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	c := g.Client(ClientOptions{})
	cases := []struct {
		path     string
		wantKept bool
	}{
		{"/away", false},
		{"/here", true},
	}
	for _, tc := range cases {
		got = nil
		req, _ := http.NewRequest(http.MethodGet, origin.URL+tc.path, nil)
		req.Header.Set("Authorization", "Bearer secret")
		req.Header.Set("X-Api-Key", "secret")
		req.Header.Set("Cookie", "s=secret")
		req.Header.Set("Accept", "application/json")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got == nil {
			t.Fatalf("%s: the redirect was not followed", tc.path)
		}
		for _, h := range []string{"Authorization", "X-Api-Key", "Cookie"} {
			if kept := got.Get(h) != ""; kept != tc.wantKept {
				t.Errorf("%s: %s kept %v, want %v", tc.path, h, kept, tc.wantKept)
			}
		}
		if got.Get("Accept") != "application/json" {
			t.Errorf("%s: Accept lost", tc.path)
		}
	}
}
