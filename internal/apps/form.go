package apps

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Control kinds of an input form field. Easy-UI apps list fields as one-key
// mappings named by the kind; graph apps give it as the `type` of each
// start-node variable.
const (
	FieldTextInput        = "text-input"
	FieldParagraph        = "paragraph"
	FieldSelect           = "select"
	FieldNumber           = "number"
	FieldCheckbox         = "checkbox"
	FieldFile             = "file"
	FieldFileList         = "file-list"
	FieldJSONObject       = "json_object"
	FieldExternalDataTool = "external_data_tool"
)

// FieldKinds lists the control kinds this package understands.
var FieldKinds = []string{
	FieldTextInput, FieldParagraph, FieldSelect, FieldNumber, FieldCheckbox,
	FieldFile, FieldFileList, FieldJSONObject, FieldExternalDataTool,
}

// FormField is one field of an app's input form: a value the caller passes
// in `inputs` under Variable.
type FormField struct {
	// Kind is one of FieldKinds, or whatever the file says for kinds this
	// package does not know.
	Kind        string
	Variable    string
	Label       string
	Required    bool
	MaxLength   *int
	Default     any
	Options     []string
	Hide        bool
	Description string
	Placeholder string
	Hint        string
	// The allowed_* lists apply to file and file-list fields.
	AllowedFileTypes         []string
	AllowedFileExtensions    []string
	AllowedFileUploadMethods []string
	// JSONSchema applies to json_object fields: a schema object or its text.
	JSONSchema any
	// ToolType, Enabled and Config describe an external_data_tool field.
	ToolType string
	Enabled  *bool
	Config   map[string]any
	// Extra keeps the keys of the field this package does not read.
	Extra map[string]any
}

// Known reports whether Kind is one of FieldKinds.
func (f FormField) Known() bool { return slices.Contains(FieldKinds, f.Kind) }

// UnmarshalYAML reads an easy-UI form item, {kind: {label, variable, …}}.
// The flat form of a start-node variable, {type: kind, variable, …}, is
// accepted too.
func (f *FormField) UnmarshalYAML(n *yaml.Node) error {
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	field, err := fieldFromItem(m)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*f = field
	return nil
}

// fieldFromItem reads one easy-UI form item.
func fieldFromItem(m map[string]any) (FormField, error) {
	if _, flat := m["variable"]; flat {
		return fieldFromVariable(m), nil
	}
	var keys []string
	for k, v := range m {
		if _, ok := v.(map[string]any); ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return FormField{}, fmt.Errorf("an input form item must be a mapping with one key naming its kind, such as {text-input: {label: …, variable: …}}")
	}
	kind := keys[0]
	for _, k := range keys { // prefer a kind we know when there are several keys
		if slices.Contains(FieldKinds, k) {
			kind = k
			break
		}
	}
	field := fieldFrom(kind, m[kind].(map[string]any), kind == FieldExternalDataTool)
	if field.Variable == "" {
		return FormField{}, fmt.Errorf("the %s input form item has no variable", kind)
	}
	return field, nil
}

// fieldFromVariable reads a start-node variable, whose `type` is its kind.
func fieldFromVariable(m map[string]any) FormField {
	return fieldFrom(asString(m["type"]), m, false)
}

// fieldFrom reads the settings of a field of the given kind. typeIsTool says
// whether a `type` key names an external tool rather than the kind.
func fieldFrom(kind string, m map[string]any, typeIsTool bool) FormField {
	f := FormField{Kind: kind}
	for k, v := range m {
		switch k {
		case "variable":
			f.Variable = asString(v)
		case "label":
			f.Label = asString(v)
		case "required":
			f.Required = asBool(v)
		case "max_length":
			f.MaxLength = asInt(v)
		case "default":
			f.Default = v
		case "options":
			f.Options = asStrings(v)
		case "hide":
			f.Hide = asBool(v)
		case "description":
			f.Description = asString(v)
		case "placeholder":
			f.Placeholder = asString(v)
		case "hint":
			f.Hint = asString(v)
		case "allowed_file_types":
			f.AllowedFileTypes = asStrings(v)
		case "allowed_file_extensions":
			f.AllowedFileExtensions = asStrings(v)
		case "allowed_file_upload_methods":
			f.AllowedFileUploadMethods = asStrings(v)
		case "json_schema":
			f.JSONSchema = v
		case "enabled":
			b := asBool(v)
			f.Enabled = &b
		case "config":
			f.Config, _ = v.(map[string]any)
		case "type":
			if typeIsTool {
				f.ToolType = asString(v)
			} else if asString(v) != kind {
				f.extra(k, v)
			}
		default:
			f.extra(k, v)
		}
	}
	return f
}

func (f *FormField) extra(k string, v any) {
	if f.Extra == nil {
		f.Extra = map[string]any{}
	}
	f.Extra[k] = v
}

// FormItem is one entry of the user_input_form list that /parameters
// returns: a single key, the control kind, holding the field's settings.
type FormItem map[string]map[string]any

// Item converts the field to its /parameters entry. It reports false for a
// kind the API cannot describe; such fields are left out of the list.
func (f FormField) Item() (FormItem, bool) {
	if !f.Known() || f.Variable == "" {
		return nil, false
	}
	c := map[string]any{
		"label":    f.Label,
		"variable": f.Variable,
		"required": f.Required,
		"hide":     f.Hide,
	}
	if f.Label == "" {
		c["label"] = f.Variable
	}
	setText := func(key, v string) {
		if v != "" {
			c[key] = v
		}
	}
	setText("description", f.Description)
	if f.Kind != FieldExternalDataTool {
		setText("hint", f.Hint)
	}
	switch f.Kind {
	case FieldTextInput, FieldParagraph, FieldNumber, FieldFile, FieldFileList:
		setText("placeholder", f.Placeholder)
	}

	switch f.Kind {
	case FieldTextInput, FieldParagraph:
		if s, ok := defaultText(f.Default); ok {
			c["default"] = s
		}
		if f.MaxLength != nil {
			c["max_length"] = *f.MaxLength
		}
	case FieldSelect:
		c["options"] = nonNil(f.Options)
		if s, ok := defaultText(f.Default); ok {
			c["default"] = s
		}
	case FieldNumber:
		if v, ok := defaultNumber(f.Default); ok {
			c["default"] = v
		}
	case FieldCheckbox:
		if f.Default != nil {
			if b, ok := f.Default.(bool); ok {
				c["default"] = b
			} else if b, err := strconv.ParseBool(asString(f.Default)); err == nil {
				c["default"] = b
			}
		}
	case FieldFile, FieldFileList:
		if f.Default != nil {
			c["default"] = jsonSafe(f.Default)
		}
		if f.Kind == FieldFileList && f.MaxLength != nil {
			c["max_length"] = *f.MaxLength
		}
		c["allowed_file_types"] = nonNil(f.AllowedFileTypes)
		c["allowed_file_extensions"] = nonNil(f.AllowedFileExtensions)
		c["allowed_file_upload_methods"] = nonNil(f.AllowedFileUploadMethods)
	case FieldJSONObject:
		if f.Default != nil {
			c["default"] = jsonSafe(f.Default)
		}
		if f.JSONSchema != nil {
			c["json_schema"] = jsonSafe(f.JSONSchema)
		}
	case FieldExternalDataTool:
		setText("type", f.ToolType)
		if f.Enabled != nil {
			c["enabled"] = *f.Enabled
		}
		if f.Config != nil {
			c["config"] = jsonSafe(f.Config)
		}
	}
	return FormItem{f.Kind: c}, true
}

// defaultText gives a text field's default as a string.
func defaultText(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", false
	case string:
		return v, true
	case map[string]any, []any:
		b, err := json.Marshal(jsonSafe(v))
		return string(b), err == nil
	default:
		return asString(v), true
	}
}

// defaultNumber gives a number field's default: a number, or a string that
// holds one.
func defaultNumber(v any) (any, bool) {
	switch v := v.(type) {
	case int, int64, uint64:
		return v, true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, false
		}
		return v, true
	case string:
		if strings.TrimSpace(v) == "" {
			return nil, false
		}
		return v, true
	}
	return nil, false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// asString reads a scalar as text; YAML may have typed it as a number or a
// boolean.
func asString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	default:
		return fmt.Sprint(v)
	}
}

func asBool(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		b, _ := strconv.ParseBool(strings.TrimSpace(v))
		return b
	case int:
		return v != 0
	case float64:
		return v != 0
	}
	return false
}

func asInt(v any) *int {
	var n int
	switch v := v.(type) {
	case int:
		n = v
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > math.MaxInt32 {
			return nil
		}
		n = int(v)
	case string:
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return nil
		}
		n = i
	default:
		return nil
	}
	return &n
}

func asStrings(v any) []string {
	switch v := v.(type) {
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if e != nil {
				out = append(out, asString(e))
			}
		}
		return out
	case string:
		return []string{v}
	}
	return nil
}

// jsonSafe turns a value read from YAML into one encoding/json can always
// write: maps with non-text keys get text keys, and values JSON has no form
// for become their text.
func jsonSafe(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = jsonSafe(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[asString(k)] = jsonSafe(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = jsonSafe(e)
		}
		return out
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return asString(v)
		}
		return v
	case nil, string, bool, int, int64, uint64:
		return v
	default:
		if _, err := json.Marshal(v); err != nil {
			return fmt.Sprint(v)
		}
		return v
	}
}
