package workflow

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"appkb/internal/platform/jsonnum"
)

type pinPoint struct {
	X int `json:"x"`
}

var pinFile = File{Type: "image", TransferMethod: "remote_url", RemoteURL: "https://x/a.png", Filename: "a.png", Size: 3}

var pinFileMap = map[string]any{
	"dify_model_identity": FileIdentity, "filename": "a.png", "remote_url": "https://x/a.png",
	"size": 3.0, "transfer_method": "remote_url", "type": "image",
}

// TestTextPinned pins how Text shows each kind of value today: templates,
// answers and tool arguments print these.
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
		{"json number with zeros", json.Number("1.50"), "1.5"},
		{"json number exponent", json.Number("1e3"), "1000"},
		{"big json number", json.Number("12345678901234567890"), "12345678901234567000"},
		{"bad json number", json.Number("bad"), "bad"},
		{"list", []any{1, "a", nil, 2.5}, `[1,"a",null,2.5]`},
		{"nested map", map[string]any{"b": 1, "a": []any{true}}, `{"a":[true],"b":1}`},
		{"string list", []string{"x", "y"}, `["x","y"]`},
		{"struct", pinPoint{2}, `{"x":2}`},
		{"duration", time.Second, "1000000000"},
		{"file", pinFile, "https://x/a.png"},
		{"file pointer", &pinFile, "https://x/a.png"},
		{"file without url", File{Filename: "n.txt"}, "n.txt"},
		{"file list", []File{pinFile}, `[{"dify_model_identity":"","type":"image","transfer_method":"remote_url","remote_url":"https://x/a.png","filename":"a.png","size":3}]`},
		{"file map stays JSON", map[string]any{"dify_model_identity": FileIdentity, "url": "u"}, `{"dify_model_identity":"__dify__file__","url":"u"}`},
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

// TestPlainPinned pins the JSON-like shape plain gives scripts, templates
// and events.
func TestPlainPinned(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"nil", nil, nil},
		{"string", "a", "a"},
		{"bool", true, true},
		{"float", 2.5, 2.5},
		{"int becomes float64", 3, 3.0},
		{"int8 becomes float64", int8(-4), -4.0},
		{"int64 stays int64", int64(1) << 62, int64(1) << 62},
		{"uint64 becomes float64", uint64(math.MaxUint64), float64(math.MaxUint64)},
		{"json number", json.Number("1.50"), 1.5},
		{"bad json number", json.Number("bad"), "bad"},
		{"list", []any{1, "a", nil, int64(2)}, []any{1.0, "a", nil, int64(2)}},
		{"nested map", map[string]any{"b": 1, "a": []any{true, map[string]any{"f": pinFile}}},
			map[string]any{"b": 1.0, "a": []any{true, map[string]any{"f": pinFileMap}}}},
		{"string list", []string{"x", "y"}, []any{"x", "y"}},
		{"struct", pinPoint{2}, map[string]any{"x": 2.0}},
		{"duration", time.Second, 1e9},
		{"file", pinFile, pinFileMap},
		{"file pointer", &pinFile, pinFileMap},
		{"file list", []File{pinFile}, []any{pinFileMap}},
		{"int list through JSON", []int{1, 2}, []any{1.0, 2.0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := plain(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plain(%#v) = %#v; want %#v", tc.in, got, tc.want)
			}
		})
	}
	if got, ok := plain(func() {}).(string); !ok || !strings.HasPrefix(got, "0x") {
		t.Errorf("plain(func) = %#v; want its fmt form", got)
	}
}

// TestParseNumberPinned pins which values count as numbers.
func TestParseNumberPinned(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want float64
		ok   bool
	}{
		{"nil", nil, 0, false},
		{"bool", true, 0, false},
		{"float", 2.5, 2.5, true},
		{"int", 3, 3, true},
		{"json number", json.Number("1e3"), 1000, true},
		{"bad json number", json.Number("bad"), 0, false},
		{"text", " 12.5 ", 12.5, true},
		{"exponent text", "1e3", 1000, true},
		{"empty text", "", 0, false},
		{"hex text", "0x10", 0, false},
		{"word", "x", 0, false},
		{"list", []any{1}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := jsonnum.Number(tc.in)
			if ok != tc.ok || got != tc.want {
				t.Errorf("jsonnum.Number(%#v) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
	if got, ok := jsonnum.Number("Inf"); !ok || !math.IsInf(got, 1) {
		t.Errorf(`jsonnum.Number("Inf") = %v, %v; want +Inf, true`, got, ok)
	}
}
