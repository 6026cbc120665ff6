package jsonnum

import (
	"encoding/json"
	"math"
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

func TestPlainWith(t *testing.T) {
	own := func(v any) (any, bool) {
		if n, ok := v.(int64); ok {
			return n, true
		}
		if p, ok := v.(point); ok {
			return "point", p.X > 0
		}
		return nil, false
	}
	in := map[string]any{"n": []any{int64(1), 2, point{X: 1}, point{X: 0}}}
	want := map[string]any{"n": []any{int64(1), 2.0, "point", map[string]any{"x": 0.0}}}
	if got := PlainWith(in, own); !reflect.DeepEqual(got, want) {
		t.Errorf("PlainWith = %#v; want %#v", got, want)
	}
	if got := PlainWith(int64(5), nil); got != 5.0 {
		t.Errorf("PlainWith(int64, nil) = %#v; want 5.0", got)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {3, "3"}, {-3, "-3"}, {2.5, "2.5"}, {1e15 - 1, "999999999999999"},
		{1e15, "1000000000000000"}, {1e21, "1000000000000000000000"}, {1e-7, "0.0000001"},
		{math.NaN(), "NaN"}, {math.Inf(1), "+Inf"},
	}
	for _, tc := range tests {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("Format(%v) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, ""},
		{"string", "a", "a"},
		{"bool", false, "false"},
		{"whole float", 3.0, "3"},
		{"int64", int64(1) << 62, "4611686018427388000"},
		{"json number", json.Number("1.50"), "1.5"},
		{"bad json number", json.Number("bad"), "bad"},
		{"nested", map[string]any{"b": []any{1, nil}, "a": "x"}, `{"a":"x","b":[1,null]}`},
		{"struct", point{X: 2}, `{"x":2}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Text(tc.in); got != tc.want {
				t.Errorf("Text(%#v) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}
