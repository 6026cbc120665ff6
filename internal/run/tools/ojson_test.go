package tools

import (
	"errors"
	"strings"
	"testing"
)

// Nesting is bounded: deep texts are refused with a clear error instead of
// exhausting the stack, and texts up to the bound still parse.
func TestParseOrderedDepth(t *testing.T) {
	cases := []struct {
		name    string
		text    string
		wantErr bool
	}{
		{"arrays at the bound", strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth), false},
		{"arrays one past the bound", strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1), true},
		{"objects past the bound", strings.Repeat(`{"a":`, MaxJSONDepth+1) + "1" + strings.Repeat("}", MaxJSONDepth+1), true},
		// 9.5 MB of brackets, never closed: the whole text need not be read.
		{"millions of brackets", strings.Repeat("[", 9_500_000), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseOrdered(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, errTooDeep) {
				t.Fatalf("err = %v, want the nesting error", err)
			}
		})
	}
}

// FuzzParseOrdered feeds the JSON reader of the json_process tools any text,
// deeply nested ones among the seeds: it must return a value or an error,
// never crash, and what it reads must write back as JSON that reads again.
func FuzzParseOrdered(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}]}`, `[]`, `"x"`, `1e400`,
		strings.Repeat("[", 5000), strings.Repeat(`{"k":`, 600) + "0" + strings.Repeat("}", 600),
		strings.Repeat("[{}", 300) + strings.Repeat("]", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseOrdered(s)
		if err != nil {
			return
		}
		out := dumpJSON(v, false)
		if _, err := parseOrdered(out); err != nil {
			t.Fatalf("%q read as %v, written as %q, which does not read again: %v", s, v, out, err)
		}
	})
}
