package workflow

import (
	"strings"
)

// toolInput resolves one entry of tool_parameters (or of a version 2
// tool_configurations): a selector for variable, a {{#…#}} template for
// mixed, the literal for constant.
func (x *nodeRun) toolInput(entry map[string]any) any {
	v := entry["value"]
	switch asString(entry["type"]) {
	case "variable":
		return x.get(selectorOf(v))
	case "mixed":
		if s, ok := v.(string); ok {
			return x.pool.Render(s)
		}
	}
	return v
}

// isTypedInput reports whether a configuration value is wrapped as
// {type, value}, as files with tool_node_version 2 write them.
func isTypedInput(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	_, hasValue := m["value"]
	switch asString(m["type"]) {
	case "variable", "mixed", "constant":
		return m, hasValue
	}
	return nil, false
}

// toolArgs gathers the arguments of a tool node: the constant settings of
// tool_configurations first, then tool_parameters, which win.
func (x *nodeRun) toolArgs() map[string]any {
	args := map[string]any{}
	for k, v := range asMap(x.d["tool_configurations"]) {
		if m, ok := isTypedInput(v); ok {
			args[k] = x.toolInput(m)
			continue
		}
		args[k] = v
	}
	for k, v := range asMap(x.d["tool_parameters"]) {
		if m, ok := v.(map[string]any); ok {
			args[k] = x.toolInput(m)
		}
	}
	return args
}

// runTool runs one built-in tool (see tools.go). Outputs are text, files
// and json, plus the named variables the tool gives.
func runTool(x *nodeRun) (*outcome, error) {
	providerType := asString(x.d["provider_type"])
	provider := asString(x.d["provider_name"])
	if provider == "" {
		provider = asString(x.d["provider_id"])
	}
	name := asString(x.d["tool_name"])
	tool := findTool(providerType, provider, name)
	if tool == nil {
		tool = findTool(providerType, asString(x.d["provider_id"]), name)
	}
	if tool == nil {
		reason := unavailableReason(providerType, provider, asString(x.d["plugin_unique_identifier"]), name)
		return nil, nodeErr("ToolNodeError", "The %q node %q cannot run: %s.", "tool", x.n.title, reason)
	}
	args := x.toolArgs()
	inputs := plainMap(args)
	process := map[string]any{"provider": tool.Provider, "tool": tool.Name}
	prepared, err := tool.prepare(args)
	if err != nil {
		return &outcome{inputs: inputs, process: process}, nodeErr("ToolParameterError", "The tool %s/%s of node %q: %v.", tool.Provider, tool.Name, x.n.title, err)
	}
	env := &toolEnv{ctx: x.ctx, e: x.r.e, appID: x.r.in.AppID, userID: x.r.in.UserID}
	out, err := tool.Run(env, prepared)
	if err != nil {
		return &outcome{inputs: inputs, process: process}, nodeErr("ToolNodeError", "The tool %s/%s of node %q failed: %s.", tool.Provider, tool.Name, x.n.title, strings.TrimSuffix(err.Error(), "."))
	}
	return &outcome{inputs: inputs, process: process, outputs: toolOutputs(out)}, nil
}

// toolOutputs is the output map of a tool node for one result.
func toolOutputs(out *toolOutput) map[string]any {
	outputs := map[string]any{}
	for k, v := range out.Vars {
		outputs[k] = v
	}
	outputs["text"] = out.Text
	outputs["files"] = orEmpty(out.Files)
	outputs["json"] = orEmpty(out.JSON)
	return outputs
}

func orEmpty(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}
