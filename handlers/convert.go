package handlers

import (
	"encoding/json"
	"fmt"
)

// valueOf returns what p points to, or the zero value for nil.
func valueOf[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// valueOr returns what p points to, or def for nil: a query parameter
// with its default.
func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// toWire copies a domain value into a generated wire type through JSON. The
// domain structs carry the wire names as JSON tags; going through JSON also
// fills the generated union types (input form items, tool icons).
func toWire[T any](v any) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, fmt.Errorf("encode %T: %w", v, err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("decode into %T: %w", out, err)
	}
	return out, nil
}
