package workflow

import (
	"reflect"
	"testing"
)

// TestBalancedLenPinned pins how the {…} span of a model's answer is
// measured: braces inside JSON strings (escapes honoured) do not count.
func TestBalancedLenPinned(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{`{}`, 2},
		{`{"a": {"b": 1}} tail`, 15},
		{`{"a": "}"}`, 10},
		{`{"a": "\"}"}x`, 12},
		{`{"a": "\\"}x`, 11},
		{`{"a": 1`, -1},
		{`{"a": "}`, -1},
		{`{"a": "\`, -1},
		{`{{}`, -1},
	}
	for _, tc := range tests {
		if got := balancedLen(tc.s); got != tc.want {
			t.Errorf("balancedLen(%q) = %d; want %d", tc.s, got, tc.want)
		}
	}
}

func TestFirstJSONObjectPinned(t *testing.T) {
	tests := []struct {
		s    string
		want map[string]any
		ok   bool
	}{
		{`{"a": 1}`, map[string]any{"a": 1.0}, true},
		{"Here:\n```json\n{\"a\": \"}{\"}\n```", map[string]any{"a": "}{"}, true},
		{`{"broken": {"inner": 1}, } then {"b": 2}`, map[string]any{"b": 2.0}, true},
		{`no object`, nil, false},
		{`{"open": "`, nil, false},
	}
	for _, tc := range tests {
		got, ok := firstJSONObject(tc.s)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("firstJSONObject(%q) = %#v, %v; want %#v, %v", tc.s, got, ok, tc.want, tc.ok)
		}
	}
}
