package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"appkb/internal/platform/netguard"
)

// openAPIMaxBody bounds a schema or a response an OpenAPI tool reads.
const openAPIMaxBody = MaxAnswerBytes

// parseOpenAPI reads an OpenAPI 3 document (JSON or YAML).
func parseOpenAPI(data []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("the schema is not an OpenAPI 3 document: %v", err)
	}
	if doc.Paths == nil || doc.Paths.Len() == 0 {
		return nil, errors.New("the schema has no paths")
	}
	return doc, nil
}

// openAPITools loads the provider's schema and makes a tool of each
// operation.
func (r *Registry) openAPITools(ctx context.Context, id string, e *Provider) ([]*Tool, error) {
	data := e.schemaData
	if data == nil {
		var err error
		if data, err = fetchSchema(ctx, e, r.guard); err != nil {
			return nil, err
		}
	}
	doc, err := parseOpenAPI(data)
	if err != nil {
		return nil, err
	}
	return OpenAPITools(doc, id, e, r.guard)
}

func fetchSchema(ctx context.Context, e *Provider, guard *netguard.Guard) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Schema, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range e.Headers {
		req.Header.Set(k, v)
	}
	c := guard.Client(netguard.ClientOptions{})
	defer c.CloseIdleConnections()
	res, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the schema %s failed: %v", e.Schema, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return nil, fmt.Errorf("fetching the schema %s failed with HTTP status %d", e.Schema, res.StatusCode)
	}
	return io.ReadAll(io.LimitReader(res.Body, openAPIMaxBody))
}

var opNameRe = regexp.MustCompile(`[^a-zA-Z0-9_]+`)

// OpenAPITools makes one tool of each operation of doc. A tool is named by
// the operation's operationId (or method and path); its arguments are the
// operation's path, query and header parameters and the properties of a
// JSON request body.
func OpenAPITools(doc *openapi3.T, provider string, e *Provider, guard *netguard.Guard) ([]*Tool, error) {
	base := strings.TrimRight(e.BaseURL, "/")
	if base == "" && len(doc.Servers) > 0 {
		base = strings.TrimRight(doc.Servers[0].URL, "/")
	}
	if base == "" {
		return nil, errors.New("the schema names no server; set base_url in the tools file")
	}
	// One client for all the provider's operations, so that calls to the
	// service reuse its connections (each is checked by the guard when it
	// is dialled).
	client := guard.Client(netguard.ClientOptions{MaxIdleConns: 8})
	var out []*Tool
	paths := doc.Paths.InMatchingOrder()
	sort.Strings(paths)
	for _, p := range paths {
		item := doc.Paths.Value(p)
		for method, op := range item.Operations() {
			name := op.OperationID
			if name == "" {
				name = strings.Trim(opNameRe.ReplaceAllString(strings.ToLower(method)+"_"+p, "_"), "_")
			}
			props := map[string]any{}
			required := []any{}
			in := map[string]string{}
			params := append(openapi3.Parameters{}, item.Parameters...)
			params = append(params, op.Parameters...)
			for _, pr := range params {
				if pr.Value == nil {
					continue
				}
				prop := map[string]any{"type": "string", "description": pr.Value.Description}
				if pr.Value.Schema != nil && pr.Value.Schema.Value != nil {
					prop = schemaMap(pr.Value.Schema.Value)
					if pr.Value.Description != "" {
						prop["description"] = pr.Value.Description
					}
				}
				props[pr.Value.Name] = prop
				in[pr.Value.Name] = pr.Value.In
				if pr.Value.Required {
					required = append(required, pr.Value.Name)
				}
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil && mt.Schema.Value != nil {
					s := mt.Schema.Value
					for k, ref := range s.Properties {
						if ref.Value != nil {
							props[k] = schemaMap(ref.Value)
							in[k] = "body"
						}
					}
					for _, k := range s.Required {
						required = append(required, k)
					}
				}
			}
			desc := op.Summary
			if desc == "" {
				desc = op.Description
			}
			out = append(out, &Tool{
				Provider: provider, Name: name, Label: name, Description: desc,
				InputSchema: map[string]any{"type": "object", "properties": props, "required": required},
				Run:         openAPICall(base, method, p, in, e, client),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// schemaMap is the JSON form of a parameter schema, for models.
func schemaMap(s *openapi3.Schema) map[string]any {
	data, err := json.Marshal(s)
	if err != nil {
		return map[string]any{"type": "string"}
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil || m == nil {
		return map[string]any{"type": "string"}
	}
	return m
}

// openAPICall sends one operation's request with the arguments in place.
func openAPICall(base, method, path string, in map[string]string, e *Provider, c *http.Client) func(context.Context, *Env, map[string]any) (*Output, error) {
	return func(ctx context.Context, env *Env, args map[string]any) (*Output, error) {
		ctx, cancel := context.WithTimeout(ctx, e.timeout())
		defer cancel()
		p := path
		q := url.Values{}
		headers := map[string]string{}
		body := map[string]any{}
		for k, v := range args {
			switch in[k] {
			case "path":
				p = strings.ReplaceAll(p, "{"+k+"}", url.PathEscape(Text(v)))
			case "query":
				q.Set(k, Text(v))
			case "header":
				headers[k] = Text(v)
			case "body":
				body[k] = v
			}
		}
		if strings.Contains(p, "{") {
			return nil, fmt.Errorf("the path %s lacks a parameter", p)
		}
		if a := e.Auth; a != nil && a.Type == "query" {
			q.Set(a.Name, a.Value)
		}
		u := base + p
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		var rd io.Reader
		if len(body) > 0 {
			data, _ := json.Marshal(body)
			rd = bytes.NewReader(data)
		}
		req, err := http.NewRequestWithContext(ctx, strings.ToUpper(method), u, rd)
		if err != nil {
			return nil, fmt.Errorf("%s is not a usable URL", u)
		}
		if rd != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
		req.Header.Set("User-Agent", "appkb")
		for k, v := range e.Headers {
			req.Header.Set(k, v)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		if a := e.Auth; a != nil {
			switch a.Type {
			case "bearer":
				req.Header.Set("Authorization", "Bearer "+a.Value)
			case "basic":
				req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(a.Value)))
			case "header":
				req.Header.Set(a.Name, a.Value)
			}
		}
		res, err := c.Do(req)
		if err != nil {
			switch {
			case errors.Is(err, netguard.ErrBlocked) || strings.Contains(err.Error(), netguard.ErrBlocked.Error()):
				return nil, fmt.Errorf("the URL %s points to an address that may not be requested (see --fetch-allow)", u)
			case ctx.Err() != nil:
				return nil, fmt.Errorf("the request to %s did not finish within %s", u, e.timeout())
			}
			return nil, fmt.Errorf("the request to %s failed: %v", u, err)
		}
		defer res.Body.Close()
		data, err := io.ReadAll(io.LimitReader(res.Body, openAPIMaxBody+1))
		if err != nil {
			return nil, fmt.Errorf("reading the response of %s failed: %v", u, err)
		}
		if len(data) > openAPIMaxBody {
			return nil, fmt.Errorf("the response of %s is larger than %d bytes", u, openAPIMaxBody)
		}
		if res.StatusCode/100 != 2 {
			return nil, fmt.Errorf("%s %s answered HTTP %d: %s", strings.ToUpper(method), u, res.StatusCode, strings.TrimSpace(string(data)))
		}
		out := &Output{Text: strings.TrimSpace(string(data))}
		var m map[string]any
		if json.Unmarshal(data, &m) == nil && m != nil {
			out.JSON = []any{m}
		}
		return capOutput(out, len(data)), nil
	}
}
