// Package tools holds the tools that tool nodes, agent nodes and agent apps
// can call, and the Registry that finds a tool by the names an exported
// file gives it. Tools come from four sources:
//
//   - the built-in set compiled into the server (docs/tools.md lists it),
//     found under Dify's own provider names and the plugin ids real
//     exports name;
//   - MCP servers, reached over Streamable HTTP or SSE;
//   - OpenAPI schemas, each operation one tool;
//   - other imported workflow apps, run as one tool each.
//
// The tools file (see LoadConfig) maps a provider id as the DSL writes it
// to one of these sources. Every outgoing connection a tool makes goes
// through a netguard.Guard.
package tools

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"appkb/internal/platform/jsonnum"
	"appkb/internal/platform/netguard"
)

// Parameter types.
const (
	paramString  = "string"
	paramNumber  = "number"
	paramBoolean = "boolean"
	paramSelect  = "select"
	// paramList is a list of strings, given as an array or as text
	// separated by commas or new lines.
	paramList = "list"
	// paramFile is a file: a file value of a workflow variable, or the URL
	// of one, read through Env.ReadFile.
	paramFile = "file"
)

// Param describes one parameter of a tool.
type Param struct {
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

// File is a file a tool produced. Callers store it and hand out its id.
type File struct {
	Name     string
	MimeType string
	Data     []byte
}

// Output is what one tool call produced.
type Output struct {
	Text string
	// JSON holds objects; it becomes the json output of a tool node.
	JSON  []any
	Files []File
	// Vars are extra named outputs of a tool node.
	Vars map[string]any
}

// Env is what a tool may use while it runs. Every field may be left zero;
// a tool that needs a missing one fails with an error that says so.
type Env struct {
	AppID, UserID string
	// HTTPClient gives the client of one outgoing request and a function
	// that releases it. When nil, a client guarded by Guard is used.
	HTTPClient func(timeout time.Duration) (*http.Client, func())
	// Guard decides which addresses tools may reach; nil refuses every
	// non-public address.
	Guard *netguard.Guard
	// Retrieve searches knowledge bases (knowledge_search).
	Retrieve func(ctx context.Context, query string, datasetIDs []string, config map[string]any) ([]map[string]any, error)
	// ReadFile gives the name and bytes of a file argument: a file value
	// of a workflow variable, or a URL.
	ReadFile func(ctx context.Context, file any) (name string, data []byte, err error)
}

// client gives a guarded client for one request.
func (env *Env) client(timeout time.Duration) (*http.Client, func()) {
	if env != nil && env.HTTPClient != nil {
		return env.HTTPClient(timeout)
	}
	var g *netguard.Guard
	if env != nil {
		g = env.Guard
	}
	c := g.Client(netguard.ClientOptions{Timeout: timeout})
	return c, c.CloseIdleConnections
}

// Tool is one callable tool.
type Tool struct {
	// Provider and Name identify the tool; Label is what people see.
	Provider    string
	Name        string
	Label       string
	Description string
	// Params describe the arguments of built-in tools. Remote tools give
	// InputSchema instead, a JSON schema their arguments are passed
	// through unchecked.
	Params      []Param
	InputSchema map[string]any
	Run         func(ctx context.Context, env *Env, args map[string]any) (*Output, error)
}

// Key is "provider/name".
func (t *Tool) Key() string { return t.Provider + "/" + t.Name }

// Prepare checks the arguments of a call against the tool's parameters:
// defaults fill the gaps, numbers, booleans and lists are converted, and a
// missing required parameter or a bad value is an error. Arguments the tool
// does not declare are dropped. Tools with an InputSchema get their
// arguments as they are, less the empty ones.
func (t *Tool) Prepare(args map[string]any) (map[string]any, error) {
	out := map[string]any{}
	if t.Params == nil && t.InputSchema != nil {
		for k, v := range args {
			if v != nil {
				out[k] = v
			}
		}
		for _, name := range schemaRequired(t.InputSchema) {
			if v, ok := out[name]; !ok || v == "" {
				return nil, fmt.Errorf("the parameter %q is required", name)
			}
		}
		return out, nil
	}
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
			f, ok := jsonnum.Number(v)
			if !ok {
				return nil, fmt.Errorf("the parameter %q must be a number, not %q", p.Name, Text(v))
			}
			v = f
		case paramBoolean:
			b, ok := toBool(v)
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
		case paramFile:
			// kept as given; the tool reads it through Env.ReadFile
		default:
			v = Text(v)
		}
		out[p.Name] = v
	}
	return out, nil
}

// schemaRequired lists the required properties of a JSON schema.
func schemaRequired(s map[string]any) []string {
	var out []string
	switch r := s["required"].(type) {
	case []any:
		for _, e := range r {
			if name, ok := e.(string); ok {
				out = append(out, name)
			}
		}
	case []string:
		out = r
	}
	return out
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

// Schema is the JSON schema of the parameters a model fills in; the
// arguments in fixed are left out.
func (t *Tool) Schema(fixed map[string]any) map[string]any {
	if t.Params == nil && t.InputSchema != nil {
		props := map[string]any{}
		for k, v := range asMap(t.InputSchema["properties"]) {
			if _, ok := fixed[k]; !ok {
				props[k] = v
			}
		}
		required := []any{}
		for _, name := range schemaRequired(t.InputSchema) {
			if _, ok := fixed[name]; !ok {
				required = append(required, name)
			}
		}
		return map[string]any{"type": "object", "properties": props, "required": required}
	}
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

func textOut(s string) *Output { return &Output{Text: s} }
