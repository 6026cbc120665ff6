package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// ---- json_process ----
//
// The JSON tools keep the order of object keys and write JSON the way
// Python's json.dumps does (", " and ": " separators, non-ASCII escaped
// when ensure_ascii is on), so their text matches Dify's.

// jobject is a JSON object that remembers the order of its keys.
type jobject struct {
	keys []string
	vals map[string]any
}

func (o *jobject) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *jobject) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	o.keys = slices.DeleteFunc(o.keys, func(s string) bool { return s == k })
}

// rename gives a key a new name in its place.
func (o *jobject) rename(from, to string) {
	v, ok := o.vals[from]
	if !ok || from == to {
		return
	}
	o.del(to)
	i := slices.Index(o.keys, from)
	o.keys[i] = to
	delete(o.vals, from)
	o.vals[to] = v
}

// jarray is a JSON array that can grow in place.
type jarray struct{ items []any }

// MaxJSONDepth bounds how deeply the arrays and objects of a JSON text the
// tools read may nest; a deeper text is refused with errTooDeep instead of
// recursing until the stack runs out.
const MaxJSONDepth = 512

var errTooDeep = fmt.Errorf("the content is not valid JSON: arrays and objects nest more than %d deep", MaxJSONDepth)

// parseOrdered reads one JSON value into jobject, jarray, string,
// json.Number, bool and nil.
func parseOrdered(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := readOrdered(dec, 0)
	if err != nil {
		if errors.Is(err, errTooDeep) {
			return nil, err
		}
		return nil, fmt.Errorf("the content is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the content is not valid JSON: text follows the value")
	}
	return v, nil
}

func readOrdered(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= MaxJSONDepth {
			return nil, errTooDeep
		}
		switch t {
		case '{':
			o := &jobject{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := readOrdered(dec, depth+1)
				if err != nil {
					return nil, err
				}
				o.set(kt.(string), v)
			}
			_, err := dec.Token()
			return o, err
		case '[':
			a := &jarray{items: []any{}}
			for dec.More() {
				v, err := readOrdered(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a.items = append(a.items, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	}
	return tok, nil
}

// dumpJSON writes v as Python's json.dumps would.
func dumpJSON(v any, ascii bool) string {
	var b strings.Builder
	writeJSON(&b, v, ascii)
	return b.String()
}

func writeJSON(b *strings.Builder, v any, ascii bool) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		b.WriteString(pyNumber(x))
	case string:
		writeJSONString(b, x, ascii)
	case *jobject:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSONString(b, k, ascii)
			b.WriteString(": ")
			writeJSON(b, x.vals[k], ascii)
		}
		b.WriteByte('}')
	case *jarray:
		b.WriteByte('[')
		for i, e := range x.items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSON(b, e, ascii)
		}
		b.WriteByte(']')
	default:
		data, _ := json.Marshal(x)
		b.Write(data)
	}
}

func writeJSONString(b *strings.Builder, s string, ascii bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (ascii && r > 0x7f && r < 0x10000):
			fmt.Fprintf(b, `\u%04x`, r)
		case ascii && r >= 0x10000:
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// toPlain turns an ordered value into the pool's plain form.
func toPlain(v any) any {
	switch x := v.(type) {
	case *jobject:
		m := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			m[k] = toPlain(x.vals[k])
		}
		return m
	case *jarray:
		out := make([]any, len(x.items))
		for i, e := range x.items {
			out[i] = toPlain(e)
		}
		return out
	case json.Number:
		f, _ := x.Float64()
		return f
	}
	return v
}

// pyText is the text Python's str() gives a parsed value: JSON for objects
// and arrays, True/False/None for the constants.
func pyText(v any, ascii bool) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return x
	case json.Number:
		return pyNumber(x)
	}
	return dumpJSON(v, ascii)
}

// pyNumber writes a JSON number as Python does after reading it: integers
// as they are, other numbers as the shortest float text ("2.50" → "2.5",
// "1e3" → "1000.0").
func pyNumber(n json.Number) string {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		return s
	}
	f, err := n.Float64()
	if err != nil {
		return s
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(sci[strings.IndexByte(sci, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	out := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(out, ".") {
		out += ".0"
	}
	return out
}
