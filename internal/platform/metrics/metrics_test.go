package metrics

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
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
	m := &dto.Metric{}
	if err := httpRequests.WithLabelValues("unmatched", "other", "405").Write(m); err != nil || m.GetCounter().GetValue() != 1000 {
		n := m.GetCounter().GetValue()
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
