package chat

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"appkb/internal/apps"
	"appkb/internal/platform/apperr"
	"appkb/internal/platform/jsonnum"
)

// ValidateInputs checks the `inputs` of a request against an app's input
// form and returns the values the prompt is built from: one entry per form
// variable, in a normalised type (text for text, paragraph and select
// fields, float64 for numbers, bool for checkboxes, the given value for
// files and JSON objects). A missing optional field takes its default, or
// "" when it has none. Keys the form does not declare are dropped.
//
// A value that breaks a rule is a 400 invalid_param error whose message
// starts with the variable name.
func ValidateInputs(form []apps.FormField, inputs map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(form))
	for _, f := range form {
		if f.Variable == "" {
			continue
		}
		v, given := inputs[f.Variable]
		if given && isEmptyValue(v) {
			given = false
		}
		if !given {
			if f.Required && f.Kind != apps.FieldExternalDataTool {
				return nil, apperr.InvalidParam("%s is required in input form", f.Variable)
			}
			out[f.Variable] = fieldDefault(f)
			continue
		}
		clean, err := checkField(f, v)
		if err != nil {
			return nil, err
		}
		out[f.Variable] = clean
	}
	return out, nil
}

// isEmptyValue reports null, "" and empty lists, which count as "not given".
func isEmptyValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	}
	return false
}

// fieldDefault is the value of an optional field the caller left out.
func fieldDefault(f apps.FormField) any {
	switch f.Kind {
	case apps.FieldNumber:
		if n, ok := toNumber(f.Default); ok {
			return n
		}
		return ""
	case apps.FieldCheckbox:
		if b, ok := f.Default.(bool); ok {
			return b
		}
		return false
	case apps.FieldFile, apps.FieldFileList, apps.FieldJSONObject:
		if f.Default != nil {
			return f.Default
		}
		return ""
	}
	if f.Default == nil {
		return ""
	}
	if s, ok := f.Default.(string); ok {
		return s
	}
	return formatValue(f.Default)
}

func checkField(f apps.FormField, v any) (any, error) {
	switch f.Kind {
	case apps.FieldTextInput, apps.FieldParagraph:
		s, ok := v.(string)
		if !ok {
			return nil, apperr.InvalidParam("%s in input form must be a string", f.Variable)
		}
		if f.MaxLength != nil && *f.MaxLength > 0 && utf8.RuneCountInString(s) > *f.MaxLength {
			return nil, apperr.InvalidParam("%s in input form must be less than %d characters", f.Variable, *f.MaxLength)
		}
		return s, nil
	case apps.FieldSelect:
		s, ok := v.(string)
		if !ok {
			return nil, apperr.InvalidParam("%s in input form must be a string", f.Variable)
		}
		if !slices.Contains(f.Options, s) {
			return nil, apperr.InvalidParam("%s in input form must be one of the following: %s", f.Variable, strings.Join(f.Options, ", "))
		}
		return s, nil
	case apps.FieldNumber:
		n, ok := toNumber(v)
		if !ok {
			return nil, apperr.InvalidParam("%s in input form must be a valid number", f.Variable)
		}
		return n, nil
	case apps.FieldCheckbox:
		switch b := v.(type) {
		case bool:
			return b, nil
		case string:
			if p, err := strconv.ParseBool(strings.TrimSpace(b)); err == nil {
				return p, nil
			}
		}
		return nil, apperr.InvalidParam("%s in input form must be a boolean", f.Variable)
	case apps.FieldJSONObject:
		switch o := v.(type) {
		case map[string]any:
			return o, nil
		case string:
			var m map[string]any
			if json.Unmarshal([]byte(o), &m) == nil && m != nil {
				return m, nil
			}
		}
		return nil, apperr.InvalidParam("%s in input form must be a JSON object", f.Variable)
	case apps.FieldFile:
		if _, ok := v.(map[string]any); !ok {
			return nil, apperr.InvalidParam("%s in input form must be a file object", f.Variable)
		}
		return v, nil
	case apps.FieldFileList:
		list, ok := v.([]any)
		if !ok {
			return nil, apperr.InvalidParam("%s in input form must be a list of file objects", f.Variable)
		}
		if f.MaxLength != nil && *f.MaxLength > 0 && len(list) > *f.MaxLength {
			return nil, apperr.InvalidParam("%s in input form must have at most %d files", f.Variable, *f.MaxLength)
		}
		return list, nil
	case apps.FieldExternalDataTool:
		// The value of such a field comes from an external tool, which
		// appkb does not call; whatever the caller sent is used as is.
		return formatValue(v), nil
	}
	// A kind this server does not know: keep the value, as text when it is
	// one.
	return v, nil
}

// toNumber reads a JSON number or a text holding one.
func toNumber(v any) (float64, bool) {
	if f, ok := jsonnum.Float(v); ok {
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	if s, ok := v.(string); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

// formatValue renders an input value for a prompt: text as is, numbers
// without a needless fraction, booleans as true/false, anything else as
// JSON.
func formatValue(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
