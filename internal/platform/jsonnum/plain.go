package jsonnum

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Number returns v as a float64 when it is a number (as Float reads it) or
// text holding one, surrounding spaces allowed.
func Number(v any) (float64, bool) {
	if f, ok := Float(v); ok {
		return f, true
	}
	if s, ok := v.(string); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		return f, err == nil
	}
	return 0, false
}

// Plain returns v built only of the types encoding/json decodes into: nil,
// string, bool, float64, []any and map[string]any. Numbers of any Go type
// become float64, []string becomes []any, and any other value goes through
// a JSON encoding (its text as a string when that does not decode, or its
// fmt form when it does not encode).
func Plain(v any) any {
	switch x := v.(type) {
	case nil, string, bool, float64:
		return x
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Plain(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Plain(e)
		}
		return out
	}
	if f, ok := Float(v); ok {
		return f
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return string(b)
	}
	return out
}
