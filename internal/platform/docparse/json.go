package docparse

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// maxJSONDepth is the deepest nesting of objects and arrays accepted.
const maxJSONDepth = 1000

// maxJSONIndent caps the indentation, in levels of two spaces, so that deep
// nesting cannot multiply the size of the text.
const maxJSONIndent = 16

// parseJSON writes JSON values as indented text, keeping the order of the
// document:
//
//	{"name": "Ada", "langs": ["en", "fr"], "born": {"year": 1815}}
//
// becomes
//
//	name: Ada
//	langs:
//	  - en
//	  - fr
//	born:
//	  year: 1815
//
// An array element that is an object starts with "- " followed by its first
// member, the rest aligned under it; nested arrays give "- - item". Strings are written without quotes or
// escapes, numbers as written in the file, and true, false and null as
// themselves; an empty object or array is written as {} or []. Several
// top-level values are separated by a blank line.
func parseJSON(data []byte, lim Limits) (*Document, error) {
	s, err := plainText(data, "json")
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	w := &jsonWriter{out: lim.buf(lim.MaxTextSize), dec: dec}
	values := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, corrupt("json", "", err)
		}
		if values > 0 {
			w.out.breakLines(2)
		}
		if err := w.value(tok, 0, 0, ""); err != nil {
			return nil, err
		}
		values++
		if w.out.over {
			break
		}
	}
	if values == 0 {
		return nil, corrupt("json", "it holds no JSON value", nil)
	}
	if err := w.out.check("json", lim); err != nil {
		return nil, err
	}
	return &Document{Text: w.out.String()}, nil
}

type jsonWriter struct {
	out *textBuf
	dec *json.Decoder
	// dashes counts the array elements that start on the next line written:
	// each replaces one of its last levels of indentation with "- ".
	dashes int
}

// line writes one line at the given indentation depth.
func (w *jsonWriter) line(depth int, text string) {
	indent := min(depth, maxJSONIndent)
	k := min(w.dashes, indent)
	w.dashes = 0
	w.out.WriteString(strings.Repeat("  ", indent-k))
	w.out.WriteString(strings.Repeat("- ", k))
	w.out.WriteString(text)
	w.out.WriteString("\n")
}

// value writes the value that starts with tok. depth is the indentation of
// its first line, nest how many objects and arrays enclose it, and label is
// "key: " for an object member, "" otherwise.
func (w *jsonWriter) value(tok json.Token, depth, nest int, label string) error {
	if nest > maxJSONDepth {
		return corrupt("json", "it is nested too deeply", nil)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return w.object(depth, nest+1, label)
		case '[':
			return w.array(depth, nest+1, label)
		}
		return corrupt("json", "unexpected "+t.String(), nil)
	default:
		w.line(depth, label+scalarText(t))
		return nil
	}
}

// object writes the members of an object. A labelled object puts "key:" on
// its own line and its members one level deeper; an unlabelled one (at the
// top or in an array) writes its members at depth.
func (w *jsonWriter) object(depth, nest int, label string) error {
	d := depth
	if label != "" {
		d = depth + 1
	}
	n := 0
	for w.dec.More() {
		if w.out.over {
			return nil
		}
		kt, err := w.dec.Token()
		if err != nil {
			return corrupt("json", "", err)
		}
		key, _ := kt.(string)
		vt, err := w.dec.Token()
		if err != nil {
			return corrupt("json", "", err)
		}
		if n == 0 && label != "" {
			w.line(depth, strings.TrimSuffix(label, " "))
		}
		n++
		if err := w.value(vt, d, nest, key+": "); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil { // the closing brace
		return corrupt("json", "", err)
	}
	if n == 0 {
		w.line(depth, label+"{}")
	}
	return nil
}

// array writes the elements of an array, each starting with "- ". Under a
// label the elements are indented two levels ("key:" then "  - item"), so
// that the dash sits one level in; otherwise one level.
func (w *jsonWriter) array(depth, nest int, label string) error {
	d := depth + 1
	if label != "" {
		d = depth + 2
	}
	n := 0
	for w.dec.More() {
		if w.out.over {
			return nil
		}
		t, err := w.dec.Token()
		if err != nil {
			return corrupt("json", "", err)
		}
		if n == 0 && label != "" {
			w.line(depth, strings.TrimSuffix(label, " "))
		}
		n++
		w.dashes++
		if err := w.value(t, d, nest, ""); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil { // the closing bracket
		return corrupt("json", "", err)
	}
	if n == 0 {
		w.line(depth, label+"[]")
	}
	return nil
}

func scalarText(t json.Token) string {
	switch v := t.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		if v {
			return "true"
		}
		return "false"
	case nil:
		return "null"
	}
	return ""
}
