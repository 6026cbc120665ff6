package workflow

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"appkb/internal/apps"
	"appkb/internal/platform/jsonnum"
)

// Value types of the DSL (declared once, in package apps).
const (
	TypeString       = apps.TypeString
	TypeNumber       = apps.TypeNumber
	TypeBoolean      = apps.TypeBoolean
	TypeObject       = apps.TypeObject
	TypeFile         = apps.TypeFile
	TypeArrayString  = apps.TypeArrayString
	TypeArrayNumber  = apps.TypeArrayNumber
	TypeArrayBoolean = apps.TypeArrayBoolean
	TypeArrayObject  = apps.TypeArrayObject
	TypeArrayFile    = apps.TypeArrayFile
	TypeArrayAny     = apps.TypeArrayAny
	TypeNone         = apps.TypeNone
)

// File is a file value in the pool (sys.files, file inputs, node outputs).
// Its JSON form is the file object Dify puts in inputs and outputs.
type File struct {
	Identity       string `json:"dify_model_identity"`
	ID             string `json:"id,omitempty"`
	Type           string `json:"type"`
	TransferMethod string `json:"transfer_method"`
	URL            string `json:"url,omitempty"`
	RemoteURL      string `json:"remote_url,omitempty"`
	RelatedID      string `json:"related_id,omitempty"`
	Filename       string `json:"filename,omitempty"`
	Extension      string `json:"extension,omitempty"`
	MimeType       string `json:"mime_type,omitempty"`
	Size           int64  `json:"size"`
}

// FileIdentity marks a JSON object as a file.
const FileIdentity = "__dify__file__"

// Attr returns one of the attributes a selector may name after a file
// variable (url, name, size, mime_type, extension, type, transfer_method,
// related_id).
func (f File) Attr(name string) (any, bool) {
	switch name {
	case "url":
		if f.URL != "" {
			return f.URL, true
		}
		return f.RemoteURL, true
	case "name", "filename":
		return f.Filename, true
	case "size":
		return float64(f.Size), true
	case "mime_type":
		return f.MimeType, true
	case "extension":
		return f.Extension, true
	case "type":
		return f.Type, true
	case "transfer_method":
		return f.TransferMethod, true
	case "related_id", "id":
		if f.RelatedID != "" {
			return f.RelatedID, true
		}
		return f.ID, true
	}
	return nil, false
}

// FileFromMap reads a file object (as a client sends it or as Dify writes
// it). ok is false when m does not look like a file.
func FileFromMap(m map[string]any) (File, bool) {
	if m == nil {
		return File{}, false
	}
	_, hasMethod := m["transfer_method"]
	if m["dify_model_identity"] != FileIdentity && !hasMethod {
		return File{}, false
	}
	s := func(k string) string { v, _ := m[k].(string); return v }
	f := File{
		Identity: FileIdentity, ID: s("id"), Type: s("type"), TransferMethod: s("transfer_method"),
		URL: s("url"), RemoteURL: s("remote_url"), RelatedID: s("related_id"),
		Filename: s("filename"), Extension: s("extension"), MimeType: s("mime_type"),
	}
	if f.RelatedID == "" {
		f.RelatedID = s("upload_file_id")
	}
	if f.RemoteURL == "" && f.TransferMethod == "remote_url" {
		f.RemoteURL = f.URL
	}
	if n, ok := jsonnum.Float(m["size"]); ok {
		f.Size = int64(n)
	}
	return f, true
}

// TypeOf names the DSL type of a pool value.
func TypeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return TypeNone
	case string:
		return TypeString
	case bool:
		return TypeBoolean
	case File, *File:
		return TypeFile
	case map[string]any:
		return TypeObject
	case []File:
		return TypeArrayFile
	case []string:
		return TypeArrayString
	case []any:
		if len(x) == 0 {
			return TypeArrayAny
		}
		t := TypeOf(x[0])
		for _, e := range x[1:] {
			if TypeOf(e) != t {
				return TypeArrayAny
			}
		}
		switch t {
		case TypeString, TypeNumber, TypeBoolean, TypeObject, TypeFile:
			return "array[" + t + "]"
		}
		return TypeArrayAny
	}
	if _, ok := jsonnum.Float(v); ok {
		return TypeNumber
	}
	return TypeObject
}

// typeMatches reports whether v can stand for the declared type t. An
// untyped empty array matches every array type.
func typeMatches(t string, v any) bool {
	got := TypeOf(v)
	if got == t {
		return true
	}
	if strings.HasPrefix(t, "array") && got == TypeArrayAny {
		if arr, ok := v.([]any); ok && len(arr) == 0 {
			return true
		}
		return t == TypeArrayAny || t == "array"
	}
	if t == "array" && strings.HasPrefix(got, "array") {
		return true
	}
	return false
}

// inputNumber converts the value of a number input as Dify does: text
// (and a JSON number's own text) without a decimal point is an integer,
// int64, so that templates show 3 and not 3.0; text with one is a float64.
// A float64 (a number whose text is gone) that is whole counts as an
// integer. Text that is no integer but parses as a float (1e3) is a float,
// where Dify would refuse it.
func inputNumber(v any) (any, bool) {
	text := ""
	switch x := v.(type) {
	case string:
		text = strings.TrimSpace(x)
	case json.Number:
		text = x.String()
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
		return x, true
	default:
		if f, ok := jsonnum.Float(v); ok {
			if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return int64(f), true
			}
			return f, true
		}
		return nil, false
	}
	if !strings.Contains(text, ".") {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, true
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, false
	}
	return f, true
}

// Text renders a value the way templates show it: strings as they are,
// numbers without needless decimals, files by URL, everything else as JSON
// (see jsonnum.Text).
func Text(v any) string {
	switch x := v.(type) {
	case File:
		if u, _ := x.Attr("url"); u != "" {
			return u.(string)
		}
		return x.Filename
	case *File:
		return Text(*x)
	}
	return jsonnum.Text(v)
}

// plain converts a value into JSON-like Go values (maps, slices, strings,
// float64, bool) so that scripts, templates and events see one shape. It is
// jsonnum.PlainWith with plainOwn.
func plain(v any) any {
	return jsonnum.PlainWith(v, plainOwn)
}

// plainOwn is what plain does differently from jsonnum.Plain: integer
// inputs stay int64 (inputNumber), so that templates render them without
// a fraction, and files become their JSON objects.
func plainOwn(v any) (any, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case File:
		return fileMap(x), true
	case *File:
		return fileMap(*x), true
	case []File:
		out := make([]any, len(x))
		for i, f := range x {
			out[i] = fileMap(f)
		}
		return out, true
	}
	return nil, false
}

func fileMap(f File) map[string]any {
	f.Identity = FileIdentity
	b, _ := json.Marshal(f)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// isEmpty is the DSL's notion of "empty": nil, "", an empty array or map.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case []string:
		return len(x) == 0
	case []File:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// asList returns the elements of an array value.
func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case []string, []File:
		return plainList(x), true
	}
	return nil, false
}

func plainList(v any) []any {
	switch x := v.(type) {
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case []File:
		out := make([]any, len(x))
		for i, f := range x {
			out[i] = f
		}
		return out
	}
	return nil
}

// coerce converts v to the declared type t where the conversion is
// obvious (number text to a number, a file map to a File); otherwise v is
// returned unchanged.
func coerce(t string, v any) any {
	switch t {
	case TypeNumber:
		if f, ok := jsonnum.Number(v); ok {
			return f
		}
	case TypeString:
		if _, ok := v.(string); !ok && v != nil {
			return Text(v)
		}
	case TypeBoolean:
		switch x := v.(type) {
		case string:
			if b, err := strconv.ParseBool(x); err == nil {
				return b
			}
		default:
			if f, ok := jsonnum.Float(v); ok {
				return f != 0
			}
		}
	case TypeObject:
		if s, ok := v.(string); ok {
			var m map[string]any
			if json.Unmarshal([]byte(s), &m) == nil {
				return m
			}
		}
	case TypeFile:
		if m, ok := v.(map[string]any); ok {
			if f, ok := FileFromMap(m); ok {
				return f
			}
		}
	}
	if strings.HasPrefix(t, "array") {
		if s, ok := v.(string); ok {
			var arr []any
			if json.Unmarshal([]byte(s), &arr) == nil {
				v = arr
			}
		}
		if arr, ok := v.([]any); ok && t == TypeArrayFile {
			out := make([]any, 0, len(arr))
			for _, e := range arr {
				out = append(out, coerce(TypeFile, e))
			}
			return out
		}
		if arr, ok := v.([]any); ok && t == TypeArrayNumber {
			out := make([]any, 0, len(arr))
			for _, e := range arr {
				out = append(out, coerce(TypeNumber, e))
			}
			return out
		}
	}
	return v
}
