package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the time tools accept any IANA zone, even without system zone files
	"unicode/utf8"

	"appkb/docparse"
	"appkb/files"
)

// The built-in tools are what tool nodes and agent nodes can run. Each is
// keyed by the provider and tool names Dify gives the same tool, so that an
// exported file finds it; docs/tools.md lists them with their parameters.
// Tools of any other provider (plugins from the marketplace, custom API
// tools, workflows as tools, MCP servers) are not available.

// toolNow is the clock of the time tools; tests replace it.
var toolNow = time.Now

// Parameter types of built-in tools.
const (
	paramString  = "string"
	paramNumber  = "number"
	paramBoolean = "boolean"
	paramSelect  = "select"
	// paramList is a list of strings, given as an array or as text
	// separated by commas or new lines.
	paramList = "list"
)

// toolParam describes one parameter of a built-in tool.
type toolParam struct {
	Name string
	Type string
	// Required parameters must have a value after defaults are applied.
	Required bool
	Default  any
	// Options are the values a select parameter accepts.
	Options []string
	// LLM marks the parameters a model fills in when an agent calls the
	// tool; the others are settings the workflow author fixes.
	LLM         bool
	Description string
}

// toolOutput is what one tool call produced.
type toolOutput struct {
	Text string
	// JSON holds objects; it becomes the json output of a tool node.
	JSON  []any
	Files []any
	// Vars are extra named outputs of a tool node.
	Vars map[string]any
}

// toolEnv is what a tool may use while it runs.
type toolEnv struct {
	ctx           context.Context
	e             *Engine
	appID, userID string
}

// builtinTool is one tool of the built-in set.
type builtinTool struct {
	Provider    string
	Name        string
	Description string
	Params      []toolParam
	Run         func(env *toolEnv, args map[string]any) (*toolOutput, error)
}

// builtinTools maps "provider/tool" to the tool.
var builtinTools = map[string]*builtinTool{}

func init() {
	for _, t := range []*builtinTool{
		toolCurrentTime, toolWeekday, toolTimezoneConversion, toolTimestampToLocal, toolLocalToTimestamp,
		toolJSONParse, toolJSONReplace, toolJSONInsert, toolJSONDelete,
		toolRegexExtract, toolTextReplace, toolTextSplit, toolTextStats,
		toolWebScraper, toolKnowledgeSearch,
	} {
		builtinTools[t.Provider+"/"+t.Name] = t
	}
}

// providerKey reduces the spellings of a provider to the short name the
// built-in set uses: "time" and the plugin id "langgenius/time/time" both
// give "time". Plugins of other authors keep their full id, so that they
// never pass for a built-in tool.
func providerKey(p string) string {
	p = strings.TrimSpace(p)
	if parts := strings.Split(p, "/"); len(parts) == 3 && parts[0] == "langgenius" {
		return parts[2]
	}
	return p
}

// findTool looks a tool up by provider type, provider and tool name. It
// returns nil for every provider type but builtin and plugin (and none).
func findTool(providerType, provider, name string) *builtinTool {
	switch providerType {
	case "", "builtin", "plugin":
	default:
		return nil
	}
	return builtinTools[providerKey(provider)+"/"+strings.TrimSpace(name)]
}

// unavailableReason says why a tool cannot run, for the error of a tool
// or agent node.
func unavailableReason(providerType, provider, plugin, name string) string {
	where := fmt.Sprintf("provider %q", provider)
	if plugin != "" {
		where += fmt.Sprintf(" (plugin %s)", plugin)
	}
	switch providerType {
	case "", "builtin", "plugin":
		return fmt.Sprintf("the tool %q of %s is not one of appkb's built-in tools", name, where)
	}
	return fmt.Sprintf("the tool %q of %s is of type %s, and appkb runs only its built-in tools", name, where, providerType)
}

// prepare checks the arguments of a call against the tool's parameters:
// defaults fill the gaps, numbers, booleans and lists are converted, and a
// missing required parameter or a bad value is an error. Arguments the tool
// does not declare are dropped.
func (t *builtinTool) prepare(args map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for _, p := range t.Params {
		v, ok := args[p.Name]
		if !ok || v == nil || v == "" {
			v = p.Default
		}
		if v == nil || v == "" {
			if p.Required {
				return nil, fmt.Errorf("the parameter %q is required", p.Name)
			}
			continue
		}
		switch p.Type {
		case paramNumber:
			f, ok := parseNumber(v)
			if !ok {
				return nil, fmt.Errorf("the parameter %q must be a number, not %q", p.Name, Text(v))
			}
			v = f
		case paramBoolean:
			b, ok := coerce(TypeBoolean, v).(bool)
			if !ok {
				return nil, fmt.Errorf("the parameter %q must be true or false, not %q", p.Name, Text(v))
			}
			v = b
		case paramSelect:
			s := Text(v)
			if len(p.Options) > 0 && !slices.Contains(p.Options, s) {
				return nil, fmt.Errorf("the parameter %q must be one of %s, not %q", p.Name, strings.Join(p.Options, ", "), s)
			}
			v = s
		case paramList:
			v = stringList(v)
		default:
			v = Text(v)
		}
		out[p.Name] = v
	}
	return out, nil
}

// stringList reads a list of strings from an array or from text separated
// by commas or new lines; blank items are dropped.
func stringList(v any) []string {
	var raw []string
	if list, ok := asList(v); ok {
		for _, e := range list {
			raw = append(raw, Text(e))
		}
	} else {
		raw = strings.FieldsFunc(Text(v), func(r rune) bool { return r == ',' || r == '\n' })
	}
	var out []string
	for _, s := range raw {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// schema is the JSON schema of the parameters a model fills in.
func (t *builtinTool) schema(fixed map[string]any) map[string]any {
	props := map[string]any{}
	required := []any{}
	for _, p := range t.Params {
		if !p.LLM {
			continue
		}
		if _, ok := fixed[p.Name]; ok {
			continue
		}
		prop := map[string]any{"type": "string", "description": p.Description}
		switch p.Type {
		case paramNumber:
			prop["type"] = "number"
		case paramBoolean:
			prop["type"] = "boolean"
		case paramSelect:
			opts := make([]any, len(p.Options))
			for i, o := range p.Options {
				opts[i] = o
			}
			prop["enum"] = opts
		case paramList:
			prop["type"] = "array"
			prop["items"] = map[string]any{"type": "string"}
		}
		props[p.Name] = prop
		if p.Required {
			required = append(required, p.Name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required}
}

func str(args map[string]any, name string) string { return Text(args[name]) }

func num(args map[string]any, name string) (float64, bool) {
	f, ok := args[name].(float64)
	return f, ok
}

func flag(args map[string]any, name string) bool {
	b, _ := args[name].(bool)
	return b
}

func textOut(s string) *toolOutput { return &toolOutput{Text: s} }

// ---- time ----

// loadZone reads an IANA zone name; empty means UTC.
func loadZone(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	if name == "" || strings.EqualFold(name, "UTC") {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown timezone %q", name)
	}
	return loc, nil
}

var toolCurrentTime = &builtinTool{
	Provider: "time", Name: "current_time",
	Description: "Gives the current date and time.",
	Params: []toolParam{
		{Name: "format", Type: paramString, Default: "%Y-%m-%d %H:%M:%S", Description: "Layout in strftime notation."},
		{Name: "timezone", Type: paramString, Default: "UTC", Description: "IANA timezone, such as Europe/Berlin."},
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
		loc, err := loadZone(str(args, "timezone"))
		if err != nil {
			return nil, err
		}
		return textOut(strftime(toolNow().In(loc), str(args, "format"))), nil
	},
}

var toolWeekday = &builtinTool{
	Provider: "time", Name: "weekday",
	Description: "Tells the day of the week of a date.",
	Params: []toolParam{
		{Name: "year", Type: paramNumber, LLM: true, Description: "Year; the current year when left out."},
		{Name: "month", Type: paramNumber, Required: true, LLM: true, Description: "Month, 1 to 12."},
		{Name: "day", Type: paramNumber, Required: true, LLM: true, Description: "Day of the month, 1 to 31."},
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
		y, ok := num(args, "year")
		if !ok {
			y = float64(toolNow().Year())
		}
		m, _ := num(args, "month")
		d, _ := num(args, "day")
		t := time.Date(int(y), time.Month(int(m)), int(d), 0, 0, 0, 0, time.UTC)
		if y < 1 || m < 1 || m > 12 || d < 1 || t.Day() != int(d) {
			return nil, fmt.Errorf("%s-%s-%s is not a date", formatNumber(y), formatNumber(m), formatNumber(d))
		}
		return textOut(fmt.Sprintf("%s %d, %d is %s.", t.Month(), t.Day(), t.Year(), t.Weekday())), nil
	},
}

// localLayouts are the layouts a local time may be written in.
var localLayouts = []string{"2006-1-2 15:4:5", "2006-1-2 15:4", "2006-1-2T15:4:5", "2006-1-2", time.RFC3339}

func parseLocal(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, l := range localLayouts {
		if t, err := time.ParseInLocation(l, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time of the form 2024-01-31 13:45:00", s)
}

var toolTimezoneConversion = &builtinTool{
	Provider: "time", Name: "timezone_conversion",
	Description: "Converts a time from one timezone to another.",
	Params: []toolParam{
		{Name: "current_time", Type: paramString, Required: true, LLM: true, Description: "The time to convert, such as 2024-01-31 13:45:00."},
		{Name: "current_timezone", Type: paramString, Required: true, LLM: true, Default: "UTC", Description: "IANA timezone of that time."},
		{Name: "target_timezone", Type: paramString, Required: true, LLM: true, Default: "UTC", Description: "IANA timezone to convert to."},
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
		from, err := loadZone(str(args, "current_timezone"))
		if err != nil {
			return nil, err
		}
		to, err := loadZone(str(args, "target_timezone"))
		if err != nil {
			return nil, err
		}
		t, err := parseLocal(str(args, "current_time"), from)
		if err != nil {
			return nil, err
		}
		return textOut(t.In(to).Format("2006-01-02 15:04:05")), nil
	},
}

var toolTimestampToLocal = &builtinTool{
	Provider: "time", Name: "timestamp_to_localtime",
	Description: "Turns a Unix timestamp into a local time.",
	Params: []toolParam{
		{Name: "timestamp", Type: paramNumber, Required: true, LLM: true, Description: "Seconds since 1970-01-01 UTC."},
		{Name: "timezone", Type: paramString, LLM: true, Default: "UTC", Description: "IANA timezone of the result."},
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
		loc, err := loadZone(str(args, "timezone"))
		if err != nil {
			return nil, err
		}
		ts, _ := num(args, "timestamp")
		return textOut(time.Unix(int64(ts), 0).In(loc).Format("2006-01-02 15:04:05")), nil
	},
}

var toolLocalToTimestamp = &builtinTool{
	Provider: "time", Name: "localtime_to_timestamp",
	Description: "Turns a local time into a Unix timestamp.",
	Params: []toolParam{
		{Name: "localtime", Type: paramString, Required: true, LLM: true, Description: "The time, such as 2024-01-31 13:45:00."},
		{Name: "timezone", Type: paramString, LLM: true, Default: "UTC", Description: "IANA timezone of that time."},
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
		loc, err := loadZone(str(args, "timezone"))
		if err != nil {
			return nil, err
		}
		t, err := parseLocal(str(args, "localtime"), loc)
		if err != nil {
			return nil, err
		}
		return textOut(strconv.FormatInt(t.Unix(), 10)), nil
	},
}

// strftime formats t with the C/Python directives. Unknown directives are
// kept as written.
func strftime(t time.Time, layout string) string {
	var b strings.Builder
	for i := 0; i < len(layout); i++ {
		c := layout[i]
		if c != '%' || i+1 == len(layout) {
			b.WriteByte(c)
			continue
		}
		i++
		switch layout[i] {
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Month().String())
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'f':
			fmt.Fprintf(&b, "%06d", t.Nanosecond()/1000)
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&b, "%02d", h)
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'u':
			fmt.Fprintf(&b, "%d", (int(t.Weekday())+6)%7+1)
		case 'U':
			fmt.Fprintf(&b, "%02d", (t.YearDay()-1+7-int(t.Weekday()))/7)
		case 'w':
			fmt.Fprintf(&b, "%d", int(t.Weekday()))
		case 'W':
			fmt.Fprintf(&b, "%02d", (t.YearDay()-1+7-(int(t.Weekday())+6)%7)/7)
		case 'x':
			b.WriteString(t.Format("01/02/06"))
		case 'X':
			b.WriteString(t.Format("15:04:05"))
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(layout[i])
		}
	}
	return b.String()
}

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

// parseOrdered reads one JSON value into jobject, jarray, string,
// json.Number, bool and nil.
func parseOrdered(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := readOrdered(dec)
	if err != nil {
		return nil, fmt.Errorf("the content is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the content is not valid JSON: text follows the value")
	}
	return v, nil
}

func readOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &jobject{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := readOrdered(dec)
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
				v, err := readOrdered(dec)
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

// pathStep is one step of a JSONPath: a key, an index or a wildcard.
type pathStep struct {
	key   string
	index int
	kind  byte // 'k' key, 'i' index, '*' wildcard
}

// parsePath reads the JSONPath subset the JSON tools accept: an optional
// $, then .name, ['name'], [n] (negative counts from the end) and the
// wildcards .* and [*]. Recursive descent, filters and slices are refused.
func parsePath(p string) ([]pathStep, error) {
	s := strings.TrimSpace(p)
	s = strings.TrimPrefix(s, "$")
	var steps []pathStep
	bad := func(why string) ([]pathStep, error) {
		return nil, fmt.Errorf("the JSONPath %q %s", p, why)
	}
	first := true
	for len(s) > 0 {
		switch {
		case strings.HasPrefix(s, ".."):
			return bad("uses recursive descent (..), which is not supported")
		case s[0] == '.' || (first && s[0] != '['):
			if s[0] == '.' {
				s = s[1:]
			}
			end := strings.IndexAny(s, ".[")
			if end < 0 {
				end = len(s)
			}
			name := strings.TrimSpace(s[:end])
			s = s[end:]
			if name == "" {
				return bad("has an empty name")
			}
			if name == "*" {
				steps = append(steps, pathStep{kind: '*'})
			} else {
				steps = append(steps, pathStep{kind: 'k', key: name})
			}
		case s[0] == '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return bad("has an unclosed [")
			}
			inner := strings.TrimSpace(s[1:end])
			s = s[end+1:]
			switch {
			case inner == "*":
				steps = append(steps, pathStep{kind: '*'})
			case len(inner) >= 2 && (inner[0] == '\'' || inner[0] == '"') && inner[len(inner)-1] == inner[0]:
				steps = append(steps, pathStep{kind: 'k', key: inner[1 : len(inner)-1]})
			default:
				n, err := strconv.Atoi(inner)
				if err != nil {
					return bad(fmt.Sprintf("has [%s], which is not an index, a quoted name or *", inner))
				}
				steps = append(steps, pathStep{kind: 'i', index: n})
			}
		default:
			return bad("cannot be read")
		}
		first = false
	}
	return steps, nil
}

// pathMatch is a value found by a path, with its place in its parent.
type pathMatch struct {
	parent any // *jobject or *jarray; nil for the root
	key    string
	index  int
	value  any
}

func (m pathMatch) set(v any) {
	switch p := m.parent.(type) {
	case *jobject:
		p.set(m.key, v)
	case *jarray:
		p.items[m.index] = v
	}
}

// findPath gives every value steps reach from root.
func findPath(root any, steps []pathStep) []pathMatch {
	cur := []pathMatch{{value: root}}
	for _, st := range steps {
		var next []pathMatch
		for _, m := range cur {
			switch x := m.value.(type) {
			case *jobject:
				switch st.kind {
				case 'k':
					if v, ok := x.vals[st.key]; ok {
						next = append(next, pathMatch{parent: x, key: st.key, value: v})
					}
				case '*':
					for _, k := range x.keys {
						next = append(next, pathMatch{parent: x, key: k, value: x.vals[k]})
					}
				}
			case *jarray:
				switch st.kind {
				case 'i':
					i := st.index
					if i < 0 {
						i += len(x.items)
					}
					if i >= 0 && i < len(x.items) {
						next = append(next, pathMatch{parent: x, index: i, value: x.items[i]})
					}
				case '*':
					for i, v := range x.items {
						next = append(next, pathMatch{parent: x, index: i, value: v})
					}
				}
			}
		}
		cur = next
	}
	return cur
}

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

var jsonContent = toolParam{Name: "content", Type: paramString, Required: true, LLM: true, Description: "The JSON text to work on."}
var jsonASCII = toolParam{Name: "ensure_ascii", Type: paramBoolean, Default: true, Description: "Escape characters outside ASCII in the JSON written."}

var toolJSONParse = &builtinTool{
	Provider: "json_process", Name: "parse",
	Description: "Picks values out of JSON with a JSONPath.",
	Params: []toolParam{
		jsonContent,
		{Name: "json_filter", Type: paramString, Required: true, LLM: true, Description: "JSONPath of the values to pick, such as $.items[0].name."},
		jsonASCII,
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
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

var toolJSONReplace = &builtinTool{
	Provider: "json_process", Name: "json_replace",
	Description: "Replaces keys, values or text inside values of JSON.",
	Params: []toolParam{
		jsonContent,
		{Name: "query", Type: paramString, Required: true, LLM: true, Description: "JSONPath of the elements to change."},
		{Name: "replace_pattern", Type: paramString, LLM: true, Description: "Text to replace inside string values (pattern mode)."},
		{Name: "replace_value", Type: paramString, Required: true, LLM: true, Description: "The new key, value or text."},
		{Name: "replace_model", Type: paramSelect, Default: "pattern", Options: []string{"key", "value", "pattern"}, Description: "key renames, value replaces, pattern replaces text inside."},
		{Name: "value_decode", Type: paramBoolean, Default: false, Description: "In value mode, read the new value as JSON when it is JSON."},
		jsonASCII,
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
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

var toolJSONInsert = &builtinTool{
	Provider: "json_process", Name: "json_insert",
	Description: "Inserts a value into JSON: merges into objects, adds to arrays.",
	Params: []toolParam{
		jsonContent,
		{Name: "query", Type: paramString, Required: true, LLM: true, Description: "JSONPath of where to insert."},
		{Name: "new_value", Type: paramString, Required: true, LLM: true, Description: "The value, read as JSON when it is JSON."},
		{Name: "index", Type: paramNumber, LLM: true, Description: "Position in an array; the end when left out."},
		{Name: "create_path", Type: paramBoolean, Default: false, Description: "Create the missing objects of a path of names."},
		jsonASCII,
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
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

var toolJSONDelete = &builtinTool{
	Provider: "json_process", Name: "json_delete",
	Description: "Deletes elements of JSON.",
	Params: []toolParam{
		jsonContent,
		{Name: "query", Type: paramString, Required: true, LLM: true, Description: "JSONPath of the elements to delete."},
		jsonASCII,
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
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

// ---- text ----

var toolRegexExtract = &builtinTool{
	Provider: "regex", Name: "regex_extract",
	Description: "Finds every match of a regular expression in a text.",
	Params: []toolParam{
		{Name: "content", Type: paramString, Required: true, LLM: true, Description: "The text to search."},
		{Name: "expression", Type: paramString, Required: true, LLM: true, Description: "The regular expression (RE2 syntax)."},
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
		re, err := regexp.Compile(strings.TrimSpace(str(args, "expression")))
		if err != nil {
			return nil, fmt.Errorf("bad regular expression: %v", err)
		}
		// Like findall: the whole match without groups, the group with
		// one, and a list of groups with several.
		matches := []any{}
		for _, m := range re.FindAllStringSubmatch(strings.TrimSpace(str(args, "content")), -1) {
			switch len(m) {
			case 1:
				matches = append(matches, m[0])
			case 2:
				matches = append(matches, m[1])
			default:
				groups := make([]any, len(m)-1)
				for i, g := range m[1:] {
					groups[i] = g
				}
				matches = append(matches, groups)
			}
		}
		data, _ := json.Marshal(matches)
		return &toolOutput{Text: string(data), JSON: []any{map[string]any{"matches": matches}}, Vars: map[string]any{"matches": matches}}, nil
	},
}

var toolTextReplace = &builtinTool{
	Provider: "text", Name: "text_replace",
	Description: "Replaces every occurrence of a text, or of a regular expression, in a text.",
	Params: []toolParam{
		{Name: "text", Type: paramString, LLM: true, Description: "The text to change."},
		{Name: "find", Type: paramString, Required: true, LLM: true, Description: "What to replace."},
		{Name: "replace", Type: paramString, LLM: true, Description: "The replacement; with use_regex, $1 names a group."},
		{Name: "use_regex", Type: paramBoolean, Default: false, Description: "Read find as a regular expression (RE2 syntax)."},
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
		text, find, repl := str(args, "text"), str(args, "find"), str(args, "replace")
		if !flag(args, "use_regex") {
			return textOut(strings.ReplaceAll(text, find, repl)), nil
		}
		re, err := regexp.Compile(find)
		if err != nil {
			return nil, fmt.Errorf("bad regular expression: %v", err)
		}
		return textOut(re.ReplaceAllString(text, repl)), nil
	},
}

var toolTextSplit = &builtinTool{
	Provider: "text", Name: "text_split",
	Description: "Splits a text at a separator.",
	Params: []toolParam{
		{Name: "text", Type: paramString, LLM: true, Description: "The text to split."},
		{Name: "separator", Type: paramString, Default: `\n`, Description: `Where to split; \n and \t stand for a new line and a tab.`},
		{Name: "trim", Type: paramBoolean, Default: true, Description: "Trim blank space around parts and drop empty ones."},
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
		sep := strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(str(args, "separator"))
		parts := []any{}
		var lines []string
		for _, p := range strings.Split(str(args, "text"), sep) {
			if flag(args, "trim") {
				if p = strings.TrimSpace(p); p == "" {
					continue
				}
			}
			parts = append(parts, p)
			lines = append(lines, p)
		}
		return &toolOutput{Text: strings.Join(lines, "\n"), Vars: map[string]any{"parts": parts}}, nil
	},
}

var toolTextStats = &builtinTool{
	Provider: "text", Name: "text_stats",
	Description: "Counts the characters, words and lines of a text.",
	Params: []toolParam{
		{Name: "text", Type: paramString, LLM: true, Description: "The text to count."},
	},
	Run: func(_ *toolEnv, args map[string]any) (*toolOutput, error) {
		text := str(args, "text")
		lines := 0
		if text != "" {
			lines = strings.Count(text, "\n") + 1
		}
		stats := map[string]any{
			"characters": float64(utf8.RuneCountInString(text)),
			"words":      float64(len(strings.Fields(text))),
			"lines":      float64(lines),
		}
		return &toolOutput{
			Text: fmt.Sprintf("%d characters, %d words, %d lines", utf8.RuneCountInString(text), len(strings.Fields(text)), lines),
			JSON: []any{stats}, Vars: stats,
		}, nil
	},
}

// ---- webscraper ----

const (
	// webMaxBody bounds the page the web scraper reads.
	webMaxBody = 5 << 20
	// webTimeout bounds one fetch.
	webTimeout = 30 * time.Second
)

// pageExt maps the media types the web scraper reads to the extension
// docparse reads them as.
var pageExt = map[string]string{
	"text/html": "html", "application/xhtml+xml": "html", "text/plain": "txt", "text/markdown": "md",
	"text/csv": "csv", "application/json": "json", "application/pdf": "pdf",
}

var toolWebScraper = &builtinTool{
	Provider: "webscraper", Name: "webscraper",
	Description: "Reads the text of a web page.",
	Params: []toolParam{
		{Name: "url", Type: paramString, Required: true, LLM: true, Description: "The http or https address of the page."},
		{Name: "user_agent", Type: paramString, Description: "User-Agent header to send."},
		{Name: "generate_summary", Type: paramBoolean, Default: false, Description: "Accepted for compatibility; the whole text is returned."},
	},
	Run: func(env *toolEnv, args map[string]any) (*toolOutput, error) {
		raw := strings.TrimSpace(str(args, "url"))
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%q is not an http or https URL", raw)
		}
		ctx, cancel := context.WithTimeout(env.ctx, webTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("%q is not a usable URL", raw)
		}
		ua := str(args, "user_agent")
		if ua == "" {
			ua = "appkb"
		}
		req.Header.Set("User-Agent", ua)
		req.Header.Set("Accept", "text/html, text/plain;q=0.9, */*;q=0.5")
		client, release := env.e.httpClient(httpDefaultConnect, webTimeout)
		defer release()
		res, err := client.Do(req)
		if err != nil {
			if errors.Is(err, files.ErrBlockedAddress) || strings.Contains(err.Error(), files.ErrBlockedAddress.Error()) {
				return nil, fmt.Errorf("the URL %s points to an address that may not be requested", raw)
			}
			return nil, fmt.Errorf("fetching %s failed: %v", raw, err)
		}
		defer res.Body.Close()
		if res.StatusCode < 200 || res.StatusCode > 299 {
			return nil, fmt.Errorf("fetching %s failed with HTTP status %d", raw, res.StatusCode)
		}
		data, err := io.ReadAll(io.LimitReader(res.Body, webMaxBody+1))
		if err != nil {
			return nil, fmt.Errorf("reading %s failed: %v", raw, err)
		}
		if len(data) > webMaxBody {
			return nil, fmt.Errorf("the page %s is larger than %d bytes", raw, webMaxBody)
		}
		mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
		ext := pageExt[mt]
		if mt == "" {
			ext = "html"
		}
		if ext == "" {
			return nil, fmt.Errorf("the page %s is %s, which the web scraper cannot read", raw, mt)
		}
		doc, err := docparse.Parse("page."+ext, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %v", raw, err)
		}
		return &toolOutput{
			Text: doc.Text,
			JSON: []any{map[string]any{"url": res.Request.URL.String(), "title": doc.Title, "content_type": mt}},
		}, nil
	},
}

// ---- knowledge ----

var toolKnowledgeSearch = &builtinTool{
	Provider: "knowledge", Name: "knowledge_search",
	Description: "Searches knowledge bases and gives the passages that match a query.",
	Params: []toolParam{
		{Name: "query", Type: paramString, Required: true, LLM: true, Description: "What to search for."},
		{Name: "dataset_ids", Type: paramList, Required: true, Description: "Ids of the knowledge bases, separated by commas."},
		{Name: "top_k", Type: paramNumber, Default: float64(4), Description: "How many passages to give at most."},
		{Name: "score_threshold", Type: paramNumber, Description: "Lowest score a passage may have."},
	},
	Run: func(env *toolEnv, args map[string]any) (*toolOutput, error) {
		if env.e.Retriever == nil {
			return nil, errors.New("knowledge search is not available on this server")
		}
		ids, _ := args["dataset_ids"].([]string)
		if len(ids) == 0 {
			return nil, errors.New("the parameter \"dataset_ids\" names no knowledge base")
		}
		cfg := map[string]any{}
		if k, ok := num(args, "top_k"); ok && k > 0 {
			cfg["top_k"] = k
		}
		if s, ok := num(args, "score_threshold"); ok {
			cfg["score_threshold"] = s
		}
		items, err := env.e.Retriever.Retrieve(env.ctx, RetrieveRequest{
			AppID: env.appID, UserID: env.userID, Query: str(args, "query"), DatasetIDs: ids,
			Mode: "multiple", Config: map[string]any{"multiple_retrieval_config": cfg},
		})
		if err != nil {
			return nil, fmt.Errorf("knowledge search failed: %v", err)
		}
		var parts []string
		found := make([]any, 0, len(items))
		for _, it := range items {
			parts = append(parts, Text(it["content"]))
			found = append(found, it)
		}
		return &toolOutput{Text: strings.Join(parts, "\n\n"), JSON: found}, nil
	},
}
