package wire

import (
	"encoding/json"
	"fmt"
)

// toWire copies a domain value into a generated wire type through JSON,
// as the handlers once built their answers. The converter tests keep it as
// the oracle the explicit converters must match byte for byte.
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
