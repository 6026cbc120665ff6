package tools

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"appkb/internal/platform/jsonnum"
)

type pinPoint struct {
	X int `json:"x"`
}

// TestTextPinned pins how Text shows each kind of argument today. It
// differs from the workflow's Text on purpose in two places: a json.Number
// (a fmt.Stringer) keeps its own text, and a file map shows its URL.
func TestTextPinned(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, ""},
		{"empty string", "", ""},
		{"string", "a", "a"},
		{"true", true, "true"},
		{"false", false, "false"},
		{"float", 2.5, "2.5"},
		{"whole float", 3.0, "3"},
		{"negative zero", math.Copysign(0, -1), "0"},
		{"1e15", 1e15, "1000000000000000"},
		{"just below 1e15", 1e15 - 1, "999999999999999"},
		{"1e16", 1e16, "10000000000000000"},
		{"small float", 1e-7, "0.0000001"},
		{"NaN", math.NaN(), "NaN"},
		{"Inf", math.Inf(1), "+Inf"},
		{"float32", float32(0.1), "0.10000000149011612"},
		{"int", 3, "3"},
		{"int8", int8(-4), "-4"},
		{"big int64", int64(1) << 62, "4611686018427388000"},
		{"max uint64", uint64(math.MaxUint64), "18446744073709552000"},
		{"json number with zeros", json.Number("1.50"), "1.50"},
		{"json number exponent", json.Number("1e3"), "1e3"},
		{"big json number", json.Number("12345678901234567890"), "12345678901234567890"},
		{"bad json number", json.Number("bad"), "bad"},
		{"list", []any{1, "a", nil, 2.5}, `[1,"a",null,2.5]`},
		{"nested map", map[string]any{"b": 1, "a": []any{true}}, `{"a":[true],"b":1}`},
		{"string list", []string{"x", "y"}, `["x","y"]`},
		{"struct", pinPoint{2}, `{"x":2}`},
		{"stringer", time.Second, "1s"},
		{"file map by url", map[string]any{"dify_model_identity": fileIdentity, "url": "u", "remote_url": "r"}, "u"},
		{"file map by remote url", map[string]any{"dify_model_identity": fileIdentity, "url": "", "remote_url": "r", "filename": "n"}, "r"},
		{"file map by name", map[string]any{"dify_model_identity": fileIdentity, "filename": "n"}, "n"},
		{"file map without any", map[string]any{"dify_model_identity": fileIdentity, "url": ""}, `{"dify_model_identity":"__dify__file__","url":""}`},
		{"other map", map[string]any{"dify_model_identity": "x", "url": "u"}, `{"dify_model_identity":"x","url":"u"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Text(tc.in); got != tc.want {
				t.Errorf("Text(%#v) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
	if got := Text(func() {}); !strings.HasPrefix(got, "0x") {
		t.Errorf("Text(func) = %q; want its fmt form", got)
	}
}

// TestFormatNumberPinned pins how numbers are written (Text and the dates
// of the time tools).
func TestFormatNumberPinned(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {3, "3"}, {-3, "-3"}, {2.5, "2.5"},
		{1e15, "1000000000000000"}, {1e15 - 1, "999999999999999"}, {-1e15 + 1, "-999999999999999"},
		{1e16, "10000000000000000"}, {1e-7, "0.0000001"}, {1e21, "1000000000000000000000"},
		{math.NaN(), "NaN"}, {math.Inf(-1), "-Inf"},
	}
	for _, tc := range tests {
		if got := jsonnum.Format(tc.in); got != tc.want {
			t.Errorf("jsonnum.Format(%v) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
