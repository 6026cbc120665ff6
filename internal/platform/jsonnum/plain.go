package jsonnum

import (
	"encoding/json"
	"fmt"
	"math"
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
	return PlainWith(v, nil)
}

// PlainWith is Plain with a hook for a caller's own types: at every level
// of v, own (when not nil) is asked first, and what it returns with ok
// true stands for that value as it is; other values are converted as Plain
// converts them.
func PlainWith(v any, own func(any) (any, bool)) any {
	if own != nil {
		if out, ok := own(v); ok {
			return out
		}
	}
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
			out[i] = PlainWith(e, own)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = PlainWith(e, own)
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

// Format writes f as templates show numbers: a whole number below 1e15 in
// size without a fraction, any other in decimal notation without an
// exponent.
func Format(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// Text writes v as text: nil as nothing, a string as itself, a boolean as
// true or false, a number (as Float reads it) as Format writes it, and any
// other value as its JSON encoding, or its fmt form when it does not encode.
func Text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	}
	if f, ok := Float(v); ok {
		return Format(f)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
