package jsonnum

import (
	"encoding/json"
	"testing"
)

func TestFloat(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want float64
		ok   bool
	}{
		{"float64", 2.5, 2.5, true},
		{"float32", float32(0.5), 0.5, true},
		{"int", 3, 3, true},
		{"int8", int8(-4), -4, true},
		{"uint64", uint64(7), 7, true},
		{"json number", json.Number("1e3"), 1000, true},
		{"bad json number", json.Number("x"), 0, false},
		{"text is not a number", "12", 0, false},
		{"bool", true, 0, false},
		{"nil", nil, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Float(tc.in)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Errorf("Float(%v) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}
