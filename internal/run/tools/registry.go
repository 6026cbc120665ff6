package tools

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"appkb/internal/platform/netguard"
)

// builtins maps "provider/tool" to the tools compiled into the server.
var builtins = map[string]*Tool{}

// pluginAliases maps plugin ids of other authors, as real exports name
// them, to the built-in provider that implements the same tools.
var pluginAliases = map[string]string{
	"bowenliang123/md_exporter/md_exporter":   "md_exporter",
	"bowenliang123/md_exporter":               "md_exporter",
	"bowenliang123/base64_codec/base64_codec": "base64_codec",
	"bowenliang123/base64_codec":              "base64_codec",
}

func register(list ...*Tool) {
	for _, t := range list {
		builtins[t.Key()] = t
	}
}

func init() {
	register(
		toolCurrentTime, toolWeekday, toolTimezoneConversion, toolTimestampToLocal, toolLocalToTimestamp,
		toolJSONParse, toolJSONReplace, toolJSONInsert, toolJSONDelete,
		toolRegexExtract, toolTextReplace, toolTextSplit, toolTextStats,
		toolWebScraper, toolKnowledgeSearch,
		toolBase64Encode, toolBase64Decode, toolBase64ImageDecode,
		toolMdToHTML, toolMdToMd, toolMdToDocx,
		toolCSVToJSON, toolExcelToJSON,
	)
}

// Builtins lists the built-in tools by "provider/tool".
func Builtins() map[string]*Tool {
	out := make(map[string]*Tool, len(builtins))
	for k, v := range builtins {
		out[k] = v
	}
	return out
}

// providerKey reduces the spellings of a provider to the short name the
// built-in set uses: "time" and the plugin id "langgenius/time/time" both
// give "time". Plugin ids of other authors keep their full id, unless the
// built-in set implements that plugin (pluginAliases).
func providerKey(p string) string {
	p = strings.TrimSpace(p)
	if a, ok := pluginAliases[p]; ok {
		return a
	}
	if parts := strings.Split(p, "/"); len(parts) == 3 && parts[0] == "langgenius" {
		return parts[2]
	}
	return p
}

// Ref names a tool the way a node or an agent app does.
type Ref struct {
	// ProviderType is builtin, plugin, api, workflow, mcp, … or empty.
	ProviderType string
	// Provider is provider_name, ProviderID provider_id; either may match.
	Provider, ProviderID string
	// PluginID is plugin_unique_identifier, used in errors only.
	PluginID string
	Name     string
}

func (ref Ref) providers() []string {
	var out []string
	for _, p := range []string{ref.Provider, ref.ProviderID} {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// UnavailableError says why a tool cannot be found.
type UnavailableError struct {
	Ref    Ref
	Reason string
}

func (e *UnavailableError) Error() string { return e.Reason }

// WorkflowRunner runs the published workflow of another app with inputs
// and gives its outputs; it backs workflow tools.
type WorkflowRunner func(ctx context.Context, appID, userID string, inputs map[string]any) (map[string]any, error)

// Registry finds tools: the built-in set, and the providers the tools file
// maps. The zero Registry and a nil *Registry know the built-in set only.
// A Registry is safe for concurrent use.
type Registry struct {
	cfg   *Config
	guard *netguard.Guard

	mu        sync.Mutex
	workflows WorkflowRunner
	// listed caches the tools of each MCP server and OpenAPI schema.
	listed map[string][]*Tool
}

// NewRegistry builds a registry over a loaded tools file (nil for none);
// guard decides which addresses its remote tools may reach.
func NewRegistry(cfg *Config, guard *netguard.Guard) *Registry {
	return &Registry{cfg: cfg, guard: guard, listed: map[string][]*Tool{}}
}

// SetWorkflows installs what runs workflow tools.
func (r *Registry) SetWorkflows(run WorkflowRunner) {
	r.mu.Lock()
	r.workflows = run
	r.mu.Unlock()
}

// Guard is the guard of remote tool traffic; nil refuses every non-public
// address.
func (r *Registry) Guard() *netguard.Guard {
	if r == nil {
		return nil
	}
	return r.guard
}

// entry gives the tools file's mapping of the reference's provider.
func (r *Registry) entry(ref Ref) (string, *Provider) {
	if r == nil || r.cfg == nil {
		return "", nil
	}
	for _, p := range ref.providers() {
		if e, ok := r.cfg.Providers[p]; ok {
			return p, e
		}
	}
	for _, p := range ref.providers() {
		for id, e := range r.cfg.Providers {
			if providerKey(id) == providerKey(p) {
				return id, e
			}
		}
	}
	return "", nil
}

// Find gives the tool a reference names. A provider the tools file maps
// goes to that source; otherwise builtin and plugin providers are looked up
// in the built-in set. Anything else is an *UnavailableError naming the
// provider and the tool.
func (r *Registry) Find(ctx context.Context, ref Ref) (*Tool, error) {
	ref.Name = strings.TrimSpace(ref.Name)
	if id, e := r.entry(ref); e != nil {
		return r.fromEntry(ctx, id, e, ref)
	}
	switch ref.ProviderType {
	case "", "builtin", "plugin":
		for _, p := range ref.providers() {
			if t := builtins[providerKey(p)+"/"+ref.Name]; t != nil {
				return t, nil
			}
		}
	}
	return nil, r.unavailable(ref, "")
}

func (r *Registry) unavailable(ref Ref, why string) error {
	provider := ref.Provider
	if provider == "" {
		provider = ref.ProviderID
	}
	where := fmt.Sprintf("provider %q", provider)
	if ref.PluginID != "" {
		where += fmt.Sprintf(" (plugin %s)", ref.PluginID)
	}
	if why != "" {
		return &UnavailableError{Ref: ref, Reason: fmt.Sprintf("the tool %q of %s cannot be used: %s", ref.Name, where, why)}
	}
	var reason string
	switch ref.ProviderType {
	case "", "builtin", "plugin":
		reason = fmt.Sprintf("the tool %q of %s is not one of appkb's built-in tools, and the tools file (--tools) does not map the provider", ref.Name, where)
	default:
		reason = fmt.Sprintf("the tool %q of %s is of type %s, which appkb can run only once the tools file (--tools) maps the provider", ref.Name, where, ref.ProviderType)
	}
	return &UnavailableError{Ref: ref, Reason: reason}
}

// fromEntry finds a tool in the source the tools file maps a provider to.
func (r *Registry) fromEntry(ctx context.Context, id string, e *Provider, ref Ref) (*Tool, error) {
	switch e.Type {
	case SourceBuiltin:
		if t := builtins[providerKey(e.Builtin)+"/"+ref.Name]; t != nil {
			return t, nil
		}
		return nil, r.unavailable(ref, fmt.Sprintf("the tools file maps it to the built-in provider %q, which has no such tool", e.Builtin))
	case SourceWorkflow:
		return r.workflowTool(id, e, ref), nil
	}
	list, err := r.list(ctx, id, e)
	if err != nil {
		return nil, r.unavailable(ref, err.Error())
	}
	for _, t := range list {
		if t.Name == ref.Name {
			return t, nil
		}
	}
	names := make([]string, len(list))
	for i, t := range list {
		names[i] = t.Name
	}
	return nil, r.unavailable(ref, fmt.Sprintf("%s offers no such tool (it has %s)", e.describe(), strings.Join(names, ", ")))
}

// list gives the tools of an MCP server or OpenAPI schema, fetched once.
func (r *Registry) list(ctx context.Context, id string, e *Provider) ([]*Tool, error) {
	r.mu.Lock()
	cached, ok := r.listed[id]
	r.mu.Unlock()
	if ok {
		return cached, nil
	}
	var list []*Tool
	var err error
	switch e.Type {
	case SourceMCP:
		list, err = ListMCP(ctx, e.MCPServer(id), r.guard)
	case SourceOpenAPI:
		list, err = r.openAPITools(ctx, id, e)
	default:
		err = fmt.Errorf("unknown source type %q", e.Type)
	}
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.listed[id] = list
	r.mu.Unlock()
	return list, nil
}
