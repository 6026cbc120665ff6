// Package jsonnum reads numbers out of decoded JSON values, whichever Go
// type the decoder (or a caller building values by hand) used for them, and
// writes such values back as plain JSON-like values or as text.
package jsonnum

import "encoding/json"

// Float returns v as a float64 when it is a Go number of any kind or a
// json.Number; ok is false for anything else, text included.
func Float(v any) (f float64, ok bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}
