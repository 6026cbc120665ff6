package jsontext

import "testing"

func TestStringEnd(t *testing.T) {
	tests := []struct {
		s    string
		i    int
		want int
	}{
		{`"ab"`, 0, 4},
		{`x"ab"y`, 1, 5},
		{`""`, 0, 2},
		{`"a\"b"c`, 0, 6},
		{`"a\\"b`, 0, 5},
		{`"{[}"]`, 0, 5},
		{`"never`, 0, 6},
		{`"ends in \`, 0, 10},
		{`"`, 0, 1},
	}
	for _, tc := range tests {
		if got := StringEnd(tc.s, tc.i); got != tc.want {
			t.Errorf("StringEnd(%q, %d) = %d; want %d", tc.s, tc.i, got, tc.want)
		}
	}
}
