package cors

import "testing"

func TestOriginAllowed(t *testing.T) {
	patterns := []string{"https://*.trusted.example", "https://app.example", "http://*.dev.example:8080"}
	cases := []struct {
		origin string
		want   bool
	}{
		{"https://app.example", true},
		{"https://APP.example", true},
		{"https://a.trusted.example", true},
		{"https://a.b.trusted.example", true},
		{"https://trusted.example", false}, // the wildcard needs a label
		{"https://evil.example/.trusted.example", false},
		{"https://evil.example?.trusted.example", false},
		{"https://evil.example#.trusted.example", false},
		{"https://user@a.trusted.example", false},
		{"https://eviltrusted.example", false},
		{"https://a.trusted.example.evil", false},
		{"http://a.trusted.example", false}, // other scheme
		{"https://a.trusted.example:444", false},
		{"https://a_b.trusted.example", false},
		{"http://x.dev.example:8080", true},
		{"http://x.dev.example", false},
		{"https://other.example", false},
		{"null", false},
		{"", false},
	}
	for _, tc := range cases {
		if got := originAllowed(patterns, tc.origin); got != tc.want {
			t.Errorf("originAllowed(%q) = %v, want %v", tc.origin, got, tc.want)
		}
	}
}
