package jsonnum

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestNumber(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want float64
		ok   bool
	}{
		{"int", 4, 4, true},
		{"json number", json.Number("2.5"), 2.5, true},
		{"text", " 12.5 ", 12.5, true},
		{"bad text", "twelve", 0, false},
		{"bool", false, 0, false},
		{"nil", nil, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Number(tc.in)
			if ok != tc.ok || got != tc.want {
				t.Errorf("Number(%v) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

type point struct {
	X int `json:"x"`
}

func TestPlain(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"nil", nil, nil},
		{"string", "a", "a"},
		{"int becomes float64", 3, 3.0},
		{"json number", json.Number("7"), 7.0},
		{"string slice", []string{"a", "b"}, []any{"a", "b"}},
		{"nested", map[string]any{"n": []any{int64(1), map[string]any{"s": []string{"x"}}}},
			map[string]any{"n": []any{1.0, map[string]any{"s": []any{"x"}}}}},
		{"struct through JSON", point{X: 2}, map[string]any{"x": 2.0}},
		{"int slice through JSON", []int{1, 2}, []any{1.0, 2.0}},
		{"unencodable", func() {}, "<func>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Plain(tc.in)
			if tc.name == "unencodable" {
				if _, ok := got.(string); !ok {
					t.Fatalf("Plain(func) = %T, want its fmt text", got)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plain(%v) = %#v; want %#v", tc.in, got, tc.want)
			}
		})
	}
}
