package tools

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// jsonDoc parses content and the query of a JSON tool.
func jsonDoc(args map[string]any, queryParam string) (any, []pathStep, error) {
	doc, err := parseOrdered(str(args, "content"))
	if err != nil {
		return nil, nil, err
	}
	steps, err := parsePath(str(args, queryParam))
	if err != nil {
		return nil, nil, err
	}
	return doc, steps, nil
}

// decodeValue reads a new value as JSON when it is JSON, else as text.
func decodeValue(s string) any {
	if v, err := parseOrdered(s); err == nil {
		return v
	}
	return s
}

var jsonContent = Param{Name: "content", Type: paramString, Required: true, LLM: true, Description: "The JSON text to work on."}
var jsonASCII = Param{Name: "ensure_ascii", Type: paramBoolean, Default: true, Description: "Escape characters outside ASCII in the JSON written."}

var toolJSONParse = &Tool{
	Provider: "json_process", Name: "parse",
	Description: "Picks values out of JSON with a JSONPath.",
	Params: []Param{
		jsonContent,
		{Name: "json_filter", Type: paramString, Required: true, LLM: true, Description: "JSONPath of the values to pick, such as $.items[0].name."},
		jsonASCII,
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		doc, steps, err := jsonDoc(args, "json_filter")
		if err != nil {
			return nil, err
		}
		matches := findPath(doc, steps)
		var result any
		if len(matches) == 1 {
			result = matches[0].value
		} else {
			arr := &jarray{items: []any{}}
			for _, m := range matches {
				arr.items = append(arr.items, m.value)
			}
			result = arr
		}
		out := textOut(pyText(result, flag(args, "ensure_ascii")))
		if o, ok := result.(*jobject); ok {
			out.JSON = []any{toPlain(o)}
		}
		return out, nil
	},
}

var toolJSONReplace = &Tool{
	Provider: "json_process", Name: "json_replace",
	Description: "Replaces keys, values or text inside values of JSON.",
	Params: []Param{
		jsonContent,
		{Name: "query", Type: paramString, Required: true, LLM: true, Description: "JSONPath of the elements to change."},
		{Name: "replace_pattern", Type: paramString, LLM: true, Description: "Text to replace inside string values (pattern mode)."},
		{Name: "replace_value", Type: paramString, Required: true, LLM: true, Description: "The new key, value or text."},
		{Name: "replace_model", Type: paramSelect, Default: "pattern", Options: []string{"key", "value", "pattern"}, Description: "key renames, value replaces, pattern replaces text inside."},
		{Name: "value_decode", Type: paramBoolean, Default: false, Description: "In value mode, read the new value as JSON when it is JSON."},
		jsonASCII,
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		doc, steps, err := jsonDoc(args, "query")
		if err != nil {
			return nil, err
		}
		newText := str(args, "replace_value")
		matches := findPath(doc, steps)
		switch str(args, "replace_model") {
		case "key":
			for _, m := range matches {
				if o, ok := m.parent.(*jobject); ok {
					o.rename(m.key, newText)
				}
			}
		case "value":
			var nv any = newText
			if flag(args, "value_decode") {
				nv = decodeValue(newText)
			}
			for _, m := range matches {
				if m.parent == nil {
					doc = nv
				}
				m.set(nv)
			}
		default:
			pattern := str(args, "replace_pattern")
			if pattern == "" {
				return nil, errors.New("the parameter \"replace_pattern\" is required in pattern mode")
			}
			for _, m := range matches {
				if s, ok := m.value.(string); ok {
					nv := strings.ReplaceAll(s, pattern, newText)
					if m.parent == nil {
						doc = nv
					}
					m.set(nv)
				}
			}
		}
		return textOut(dumpJSON(doc, flag(args, "ensure_ascii"))), nil
	},
}

var toolJSONInsert = &Tool{
	Provider: "json_process", Name: "json_insert",
	Description: "Inserts a value into JSON: merges into objects, adds to arrays.",
	Params: []Param{
		jsonContent,
		{Name: "query", Type: paramString, Required: true, LLM: true, Description: "JSONPath of where to insert."},
		{Name: "new_value", Type: paramString, Required: true, LLM: true, Description: "The value, read as JSON when it is JSON."},
		{Name: "index", Type: paramNumber, LLM: true, Description: "Position in an array; the end when left out."},
		{Name: "create_path", Type: paramBoolean, Default: false, Description: "Create the missing objects of a path of names."},
		jsonASCII,
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		doc, steps, err := jsonDoc(args, "query")
		if err != nil {
			return nil, err
		}
		nv := decodeValue(str(args, "new_value"))
		matches := findPath(doc, steps)
		if len(matches) == 0 && flag(args, "create_path") {
			if err := createPath(doc, steps, nv); err != nil {
				return nil, err
			}
		}
		for _, m := range matches {
			switch x := m.value.(type) {
			case *jobject:
				add, ok := nv.(*jobject)
				if !ok {
					return nil, errors.New("only an object can be inserted into an object")
				}
				for _, k := range add.keys {
					x.set(k, add.vals[k])
				}
			case *jarray:
				i, ok := num(args, "index")
				if !ok || int(i) >= len(x.items) {
					x.items = append(x.items, nv)
				} else {
					at := max(int(i), 0)
					x.items = slices.Insert(x.items, at, nv)
				}
			default:
				if m.parent == nil {
					doc = nv
				}
				m.set(nv)
			}
		}
		return textOut(dumpJSON(doc, flag(args, "ensure_ascii"))), nil
	},
}

// createPath makes the objects a path of names runs through and puts v at
// its end.
func createPath(doc any, steps []pathStep, v any) error {
	cur, ok := doc.(*jobject)
	if !ok || len(steps) == 0 {
		return errors.New("a path can only be created inside an object")
	}
	for i, st := range steps {
		if st.kind != 'k' {
			return errors.New("only a path of names can be created")
		}
		if i == len(steps)-1 {
			cur.set(st.key, v)
			return nil
		}
		next, ok := cur.vals[st.key].(*jobject)
		if !ok {
			next = &jobject{vals: map[string]any{}}
			cur.set(st.key, next)
		}
		cur = next
	}
	return nil
}

var toolJSONDelete = &Tool{
	Provider: "json_process", Name: "json_delete",
	Description: "Deletes elements of JSON.",
	Params: []Param{
		jsonContent,
		{Name: "query", Type: paramString, Required: true, LLM: true, Description: "JSONPath of the elements to delete."},
		jsonASCII,
	},
	Run: func(_ context.Context, _ *Env, args map[string]any) (*Output, error) {
		doc, steps, err := jsonDoc(args, "query")
		if err != nil {
			return nil, err
		}
		matches := findPath(doc, steps)
		// Array elements go last to first so that indexes stay right.
		slices.SortStableFunc(matches, func(a, b pathMatch) int { return b.index - a.index })
		for _, m := range matches {
			switch p := m.parent.(type) {
			case *jobject:
				p.del(m.key)
			case *jarray:
				p.items = slices.Delete(p.items, m.index, m.index+1)
			}
		}
		return textOut(dumpJSON(doc, flag(args, "ensure_ascii"))), nil
	},
}
