package codeworker

import "testing"

// TestJSONDepthStrings pins how jsonDepth treats strings: brackets in them
// do not count (escapes honoured), an unclosed one runs to the end, and the
// count stops once it passes the limit.
func TestJSONDepthStrings(t *testing.T) {
	tests := []struct {
		text  string
		limit int
		want  int
	}{
		{`["\\", [1]]`, 100, 2},
		{`["\\\"[", [1]]`, 100, 2},
		{`[["unclosed [[[`, 100, 2},
		{`"\`, 100, 0},
		{`[[[[[`, 2, 3},
		{`[]]][`, 100, 1},
	}
	for _, tc := range tests {
		if got := jsonDepth(tc.text, tc.limit); got != tc.want {
			t.Errorf("jsonDepth(%s, %d) = %d, want %d", tc.text, tc.limit, got, tc.want)
		}
	}
}
