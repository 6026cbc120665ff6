package tools

import (
	"fmt"
	"strconv"
	"strings"

	"appkb/internal/platform/jsonnum"
)

// fileIdentity marks a JSON object as a file, as workflow variables write
// them.
const fileIdentity = "__dify__file__"

// Text renders an argument as text: strings as they are, numbers without
// needless decimals, files by their URL (or name), everything else as JSON
// (see jsonnum.Text). Unlike the workflow's Text, a fmt.Stringer (a
// json.Number among them) shows its own text.
func Text(v any) string {
	switch x := v.(type) {
	case map[string]any:
		if x["dify_model_identity"] == fileIdentity {
			for _, k := range []string{"url", "remote_url", "filename"} {
				if s, ok := x[k].(string); ok && s != "" {
					return s
				}
			}
		}
	case fmt.Stringer:
		return x.String()
	}
	return jsonnum.Text(v)
}

// toBool accepts a boolean, its text or a number (non-zero is true).
func toBool(v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		return b, err == nil
	}
	if f, ok := jsonnum.Float(v); ok {
		return f != 0, true
	}
	return false, false
}

// asList returns the elements of an array value.
func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
