package metrics

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// Made-up methods and odd statuses share one label each, so a client
// cannot grow the series without bound.
func TestRequestLabelsAreBounded(t *testing.T) {
	cases := []struct{ method, want string }{
		{"GET", "GET"}, {"DELETE", "DELETE"}, {"OPTIONS", "OPTIONS"},
		{"get", "other"}, {"BREW", "other"}, {"X-1234", "other"}, {"", "other"},
	}
	for _, tc := range cases {
		if got := MethodLabel(tc.method); got != tc.want {
			t.Errorf("MethodLabel(%q) = %q, want %q", tc.method, got, tc.want)
		}
	}
	before := series(t)
	for i := range 1000 {
		Request("unmatched", fmt.Sprintf("M%d", i), http.StatusMethodNotAllowed, time.Millisecond)
		Request("unmatched", "GET", 1000+i, time.Millisecond)
	}
	if grew := series(t) - before; grew > 2 {
		t.Fatalf("2000 requests with made-up methods and statuses added %d series, want at most 2", grew)
	}
	if n := otherCount(t); n != 1000 {
		t.Fatalf("other-method count %v, want 1000", n)
	}
}

// series counts the series of the request counter.
func series(t *testing.T) int {
	t.Helper()
	fams, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "appkb_http_requests_total" {
			return len(f.GetMetric())
		}
	}
	return 0
}

// otherCount is the count of unmatched 405s with the "other" method.
func otherCount(t *testing.T) float64 {
	t.Helper()
	fams, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "appkb_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == "unmatched" && labels["method"] == "other" && labels["status"] == "405" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
