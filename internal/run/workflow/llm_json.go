package workflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strings"

	"appkb/internal/llm"
	"appkb/internal/platform/jsonnum"
	"appkb/internal/platform/jsontext"
)

// structuredSchema reads the JSON schema of an llm node's structured
// output. It reports false when structured output is off or the schema is
// not an object (a JSON text holding an object is accepted too).
// structured_output_switch_on is the older name of the switch.
func structuredSchema(d map[string]any) (map[string]any, bool) {
	if !asBool(d["structured_output_enabled"]) && !asBool(d["structured_output_switch_on"]) {
		return nil, false
	}
	switch s := asMap(d["structured_output"])["schema"].(type) {
	case map[string]any:
		return s, true
	case string:
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil && m != nil {
			return m, true
		}
	}
	return nil, false
}

// withSchemaInstruction tells the model to answer with one JSON object
// that fits schema. The instruction joins the first system message, or
// opens the conversation when there is none. msgs is not changed.
func withSchemaInstruction(msgs []llm.Message, schema map[string]any) []llm.Message {
	b, err := json.MarshalIndent(plain(schema), "", "  ")
	if err != nil {
		b = []byte(Text(schema))
	}
	note := "Answer with exactly one JSON object that is valid against the JSON Schema below. " +
		"Write only the JSON object: no explanation, no markdown, no code fence.\n" + string(b)
	out := make([]llm.Message, 0, len(msgs)+1)
	for i, m := range msgs {
		if m.Role == llm.RoleSystem {
			out = append(out, msgs[:i]...)
			m.Content = strings.TrimRight(m.Content, "\n") + "\n\n" + note
			out = append(out, m)
			return append(out, msgs[i+1:]...)
		}
	}
	out = append(out, llm.Message{Role: llm.RoleSystem, Content: note})
	return append(out, msgs...)
}

// withSchemaFormat asks backends that understand response_format for
// output constrained to schema (llm forwards Dify's "json_schema" form).
// A response_format the author chose is kept. params is not changed.
func withSchemaFormat(params, schema map[string]any) map[string]any {
	if f, ok := params["response_format"]; ok && f != nil && f != "" {
		return params
	}
	out := maps.Clone(params)
	if out == nil {
		out = map[string]any{}
	}
	out["response_format"] = "json_schema"
	out["json_schema"] = map[string]any{"name": "structured_output", "schema": plain(schema)}
	return out
}

// parseStructured reads the JSON object of a model's answer and checks it
// against schema. Failures are StructuredOutputError node errors.
func parseStructured(text string, schema map[string]any) (map[string]any, error) {
	obj, ok := firstJSONObject(text)
	if !ok {
		return nil, nodeErr("StructuredOutputError", "The model's answer holds no valid JSON object, so the structured output could not be read.")
	}
	if err := checkSchema(obj, schema, ""); err != nil {
		return nil, nodeErr("StructuredOutputError", "The structured output does not match its schema: %v", err)
	}
	return obj, nil
}

// firstJSONObject finds the JSON object in a model's answer: the whole
// answer when it is one, else the first balanced {…} span that parses.
// That passes over code fences and prose around the object. A span that
// balances but does not parse is skipped whole, so an object nested in a
// broken one is not taken for the answer.
func firstJSONObject(s string) (map[string]any, bool) {
	s = strings.TrimSpace(s)
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) == nil && m != nil {
		return m, true
	}
	for i, tries := 0, 0; i < len(s) && tries < 64; i++ {
		if s[i] != '{' {
			continue
		}
		tries++
		n := balancedLen(s[i:])
		if n < 0 {
			continue
		}
		m = nil
		if json.Unmarshal([]byte(s[i:i+n]), &m) == nil && m != nil {
			return m, true
		}
		i += n - 1
	}
	return nil, false
}

// balancedLen is the length of the {…} span s starts with, braces inside
// JSON strings not counted, or -1 when it never closes.
func balancedLen(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			i = jsontext.StringEnd(s, i) - 1
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// checkSchema checks the parts of a JSON schema that matter most for
// reading a model's answer: type (one name or a list), required and
// properties of objects, items of arrays. Other keywords are not checked.
// path names v in messages ("" for the whole output).
func checkSchema(v any, schema map[string]any, path string) error {
	if schema == nil {
		return nil
	}
	if types := schemaTypes(schema["type"]); len(types) > 0 {
		ok := false
		for _, t := range types {
			if hasJSONType(v, t) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("%s must be %s, not %s", fieldName(path), strings.Join(types, " or "), jsonTypeOf(v))
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, r := range asAnyList(schema["required"]) {
			name, _ := r.(string)
			if _, ok := x[name]; name != "" && !ok {
				return fmt.Errorf("the required field %q is missing", joinPath(path, name))
			}
		}
		props := asMap(schema["properties"])
		for name, val := range x {
			if err := checkSchema(val, asMap(props[name]), joinPath(path, name)); err != nil {
				return err
			}
		}
	case []any:
		items := asMap(schema["items"])
		for i, it := range x {
			if err := checkSchema(it, items, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func schemaTypes(t any) []string {
	switch x := t.(type) {
	case string:
		if x != "" {
			return []string{x}
		}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// hasJSONType says whether v is of the JSON schema type t. Unknown type
// names accept anything.
func hasJSONType(v any, t string) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := jsonnum.Float(v)
		return ok
	case "integer":
		f, ok := jsonnum.Float(v)
		return ok && f == math.Trunc(f) && !math.IsInf(f, 0)
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "null":
		return v == nil
	}
	return true
}

func jsonTypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	if _, ok := jsonnum.Float(v); ok {
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func fieldName(path string) string {
	if path == "" {
		return "the output"
	}
	return fmt.Sprintf("the field %q", path)
}
