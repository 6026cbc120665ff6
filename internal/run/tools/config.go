package tools

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Source types of the tools file.
const (
	SourceBuiltin  = "builtin"
	SourceMCP      = "mcp"
	SourceOpenAPI  = "openapi"
	SourceWorkflow = "workflow"
)

// MCP transports.
const (
	TransportStreamable = "streamable_http"
	TransportSSE        = "sse"
)

// DefaultTimeout bounds one call of a remote tool when the tools file sets
// no timeout.
const DefaultTimeout = 30 * time.Second

// Config is a loaded tools file.
type Config struct {
	// Providers maps a provider id, as the DSL names it (provider_id,
	// provider_name or a plugin id), to the source of its tools.
	Providers map[string]*Provider `yaml:"providers"`
}

// Provider is one entry of the tools file.
type Provider struct {
	// Type is builtin, mcp, openapi or workflow.
	Type string `yaml:"type"`
	// Builtin names the built-in provider (type builtin), such as "time".
	Builtin string `yaml:"builtin"`
	// URL is the MCP server's endpoint (type mcp).
	URL string `yaml:"url"`
	// Transport is streamable_http (the default) or sse (type mcp).
	Transport string `yaml:"transport"`
	// Headers are sent with every request (mcp and openapi), for
	// authentication for instance.
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds one tool call, in seconds (default 30).
	Timeout float64 `yaml:"timeout"`
	// Schema is the OpenAPI document: a file path (relative to the tools
	// file) or an http(s) URL (type openapi).
	Schema string `yaml:"schema"`
	// BaseURL replaces the schema's servers (type openapi).
	BaseURL string `yaml:"base_url"`
	// Auth adds a credential to every request (type openapi).
	Auth *Auth `yaml:"auth"`
	// AppID is the workflow app the tool runs (type workflow).
	AppID string `yaml:"app_id"`
	// Name, Description and Parameters describe a workflow tool to models;
	// Name defaults to the provider id's last part.
	Name        string          `yaml:"name"`
	Description string          `yaml:"description"`
	Parameters  []WorkflowParam `yaml:"parameters"`
	Extra       map[string]any  `yaml:",inline"`
	schemaData  []byte          // the schema file's content, read at load
}

// Auth is the credential of an OpenAPI provider.
type Auth struct {
	// Type is bearer, basic, header or query.
	Type string `yaml:"type"`
	// Name is the header or query parameter (header and query).
	Name string `yaml:"name"`
	// Value is the key, token or "user:password" (basic).
	Value string `yaml:"value"`
}

// WorkflowParam is one input of a workflow tool.
type WorkflowParam struct {
	Name        string `yaml:"name"`
	Type        string `yaml:"type"`
	Required    bool   `yaml:"required"`
	Description string `yaml:"description"`
}

// timeout is the provider's call timeout.
func (p *Provider) timeout() time.Duration {
	if p.Timeout > 0 {
		return time.Duration(p.Timeout * float64(time.Second))
	}
	return DefaultTimeout
}

func (p *Provider) describe() string {
	switch p.Type {
	case SourceMCP:
		return "the MCP server " + p.URL
	case SourceOpenAPI:
		return "the OpenAPI schema " + p.Schema
	}
	return "the provider"
}

// MCPServer is the server an mcp entry names.
func (p *Provider) MCPServer(name string) MCPServer {
	return MCPServer{Name: name, URL: p.URL, Transport: p.Transport, Headers: p.Headers, Timeout: p.timeout()}
}

// LoadConfig reads and checks a tools file; an empty path gives nil.
// ${NAME} in a url, schema, base_url, app_id, header or auth value is
// replaced by the environment variable NAME, so that credentials can stay
// out of the file. Schema files are read here, so a missing
// one is reported at start.
func LoadConfig(path string, getenv func(string) string) (*Config, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(data, filepath.Dir(path), getenv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig reads a tools file's content; relative schema paths are read
// from dir.
func ParseConfig(data []byte, dir string, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var cfg Config
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("not a valid tools file: %v", err)
	}
	var missing []string
	expand := func(v *string) {
		*v = os.Expand(*v, func(name string) string {
			val := getenv(name)
			if val == "" && !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
			return val
		})
	}
	for _, p := range cfg.Providers {
		if p == nil {
			continue
		}
		for _, v := range []*string{&p.URL, &p.Schema, &p.BaseURL, &p.AppID} {
			expand(v)
		}
		for k, v := range p.Headers {
			expand(&v)
			p.Headers[k] = v
		}
		if p.Auth != nil {
			expand(&p.Auth.Value)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("the environment variables %s are not set", strings.Join(missing, ", "))
	}
	ids := make([]string, 0, len(cfg.Providers))
	for id := range cfg.Providers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var problems []string
	for _, id := range ids {
		if err := cfg.Providers[id].validate(dir); err != nil {
			problems = append(problems, fmt.Sprintf("provider %q: %v", id, err))
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return &cfg, nil
}

func (p *Provider) validate(dir string) error {
	if p == nil {
		return errors.New("the entry is empty")
	}
	if len(p.Extra) > 0 {
		keys := make([]string, 0, len(p.Extra))
		for k := range p.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return fmt.Errorf("unknown keys %s", strings.Join(keys, ", "))
	}
	if p.Timeout < 0 {
		return errors.New("timeout must be positive")
	}
	checkURL := func(what, s string) error {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q is not an http or https URL", what, s)
		}
		return nil
	}
	switch p.Type {
	case SourceBuiltin:
		if p.Builtin == "" {
			return errors.New("type builtin needs builtin: the built-in provider it stands for")
		}
		found := false
		for key := range builtins {
			if strings.HasPrefix(key, providerKey(p.Builtin)+"/") {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("there is no built-in provider %q", p.Builtin)
		}
	case SourceMCP:
		if err := checkURL("url", p.URL); err != nil {
			return err
		}
		switch p.Transport {
		case "":
			p.Transport = TransportStreamable
		case TransportStreamable, TransportSSE:
		case "streamable-http", "http":
			p.Transport = TransportStreamable
		default:
			return fmt.Errorf("transport must be %s or %s, not %q", TransportStreamable, TransportSSE, p.Transport)
		}
	case SourceOpenAPI:
		if p.Schema == "" {
			return errors.New("type openapi needs schema: a file or an http(s) URL")
		}
		if strings.HasPrefix(p.Schema, "http://") || strings.HasPrefix(p.Schema, "https://") {
			if err := checkURL("schema", p.Schema); err != nil {
				return err
			}
		} else {
			path := p.Schema
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("the schema cannot be read: %v", err)
			}
			if _, err := parseOpenAPI(data); err != nil {
				return err
			}
			p.schemaData = data
		}
		if p.BaseURL != "" {
			if err := checkURL("base_url", p.BaseURL); err != nil {
				return err
			}
		}
		if p.Auth != nil {
			switch p.Auth.Type {
			case "bearer", "basic":
			case "header", "query":
				if p.Auth.Name == "" {
					return fmt.Errorf("auth of type %s needs name", p.Auth.Type)
				}
			default:
				return fmt.Errorf("auth type must be bearer, basic, header or query, not %q", p.Auth.Type)
			}
		}
	case SourceWorkflow:
		if p.AppID == "" {
			return errors.New("type workflow needs app_id: the workflow app the tool runs")
		}
	case "":
		return errors.New("type is missing (builtin, mcp, openapi or workflow)")
	default:
		return fmt.Errorf("type must be builtin, mcp, openapi or workflow, not %q", p.Type)
	}
	return nil
}
