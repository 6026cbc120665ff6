package workflow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"appkb/internal/apps"
	"appkb/internal/conversation/files"
	"appkb/internal/run/tools"
	"appkb/models"
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

// toolRef reads the provider and tool a node or an agent tool entry names.
func toolRef(m map[string]any, typeKeys ...string) tools.Ref {
	ref := tools.Ref{
		Provider: asString(m["provider_name"]), ProviderID: asString(m["provider_id"]),
		PluginID: asString(m["plugin_unique_identifier"]), Name: asString(m["tool_name"]),
	}
	for _, k := range typeKeys {
		if ref.ProviderType = asString(m[k]); ref.ProviderType != "" {
			break
		}
	}
	return ref
}

// toolEnv is what the tools of one node may use: the engine's guarded
// HTTP client and its knowledge retrieval.
func (x *nodeRun) toolEnv() *tools.Env {
	e := x.r.e
	env := &tools.Env{
		AppID: x.r.in.AppID, UserID: x.r.in.UserID, Guard: e.Tools.Guard(),
		HTTPClient: func(timeout time.Duration) (*http.Client, func()) { return e.httpClient(httpDefaultConnect, timeout) },
	}
	env.ReadFile = func(_ context.Context, v any) (string, []byte, error) {
		if l, ok := asList(v); ok && len(l) == 1 {
			v = l[0] // a list of one file, such as sys.files
		}
		f, ok := asFile(v)
		if !ok {
			s := strings.TrimSpace(Text(v))
			if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
				return "", nil, fmt.Errorf("the argument is not a file")
			}
			f = File{TransferMethod: "remote_url", RemoteURL: s}
		}
		name, _, data, err := x.fileBytes(f)
		return name, data, err
	}
	if e.Retriever != nil {
		env.Retrieve = func(ctx context.Context, query string, ids []string, cfg map[string]any) ([]map[string]any, error) {
			return e.Retriever.Retrieve(ctx, RetrieveRequest{
				AppID: x.r.in.AppID, UserID: x.r.in.UserID, Query: query, DatasetIDs: ids, Mode: "multiple", Config: cfg,
			})
		}
	}
	return env
}

// toolArgsPlain gives arguments in the plain form tools read (files as
// file objects).
func toolArgsPlain(args map[string]any) map[string]any { return plainMap(args) }

// runTool runs one tool (see package tools). Outputs are text, files and
// json, plus the named variables the tool gives.
func runTool(x *nodeRun) (*outcome, error) {
	ref := toolRef(x.d, "provider_type")
	tool, err := x.r.e.Tools.Find(x.ctx, ref)
	if err != nil {
		return nil, nodeErr("ToolNodeError", "The %q node %q cannot run: %s.", "tool", x.n.title, strings.TrimSuffix(err.Error(), "."))
	}
	args := x.toolArgs()
	inputs := plainMap(args)
	process := map[string]any{"provider": tool.Provider, "tool": tool.Name}
	prepared, err := tool.Prepare(toolArgsPlain(args))
	if err != nil {
		return &outcome{inputs: inputs, process: process}, nodeErr("ToolParameterError", "The tool %s/%s of node %q: %v.", tool.Provider, tool.Name, x.n.title, err)
	}
	out, err := tool.Run(x.ctx, x.toolEnv(), prepared)
	if err != nil {
		return &outcome{inputs: inputs, process: process}, nodeErr("ToolNodeError", "The tool %s/%s of node %q failed: %s.", tool.Provider, tool.Name, x.n.title, strings.TrimSuffix(err.Error(), "."))
	}
	if out == nil {
		out = &tools.Output{}
	}
	files, err := x.saveToolFiles(out.Files)
	if err != nil {
		return &outcome{inputs: inputs, process: process}, err
	}
	return &outcome{inputs: inputs, process: process, outputs: toolOutputs(out, files)}, nil
}

// saveToolFiles keeps the files a tool made in the engine's file store,
// as files of the app with no end user, and gives them as file values.
func (x *nodeRun) saveToolFiles(list []tools.File) ([]any, error) {
	out := []any{}
	if len(list) == 0 {
		return out, nil
	}
	store := x.r.e.Files
	if store == nil {
		return nil, nodeErr("ToolNodeError", "The tool of node %q made files, but this server keeps no files for workflows.", x.n.title)
	}
	for _, f := range list {
		row, err := store.Save(x.ctx, files.Rules{}, x.r.in.AppID, "", f.Name, f.MimeType, bytes.NewReader(f.Data))
		if err != nil {
			return nil, nodeErr("ToolNodeError", "Keeping the file %q the tool of node %q made failed: %v", f.Name, x.n.title, err)
		}
		out = append(out, ToolFile(row))
	}
	return out, nil
}

// ToolFile is the file value of a stored tool file.
func ToolFile(row *models.UploadFile) File {
	typ := "custom"
	switch {
	case strings.HasPrefix(row.MimeType, "image/"):
		typ = "image"
	case strings.HasPrefix(row.MimeType, "audio/"):
		typ = "audio"
	case strings.HasPrefix(row.MimeType, "video/"):
		typ = "video"
	case files.KindOf(row.Extension) == "document":
		typ = "document"
	}
	ext := row.Extension
	if ext != "" && !strings.HasPrefix(ext, ".") {
		ext = "." + ext
	}
	return File{
		Identity: FileIdentity, ID: row.ID, RelatedID: row.ID, Type: typ, TransferMethod: "tool_file",
		Filename: row.Name, Extension: ext, MimeType: row.MimeType, Size: row.Size,
	}
}

// toolOutputs is the output map of a tool node for one result.
func toolOutputs(out *tools.Output, files []any) map[string]any {
	outputs := map[string]any{}
	for k, v := range out.Vars {
		outputs[k] = v
	}
	outputs["text"] = out.Text
	outputs["files"] = orEmpty(files)
	outputs["json"] = orEmpty(out.JSON)
	return outputs
}

func orEmpty(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}

// maxToolDepth bounds workflows that call workflows as tools.
const maxToolDepth = 5

type toolDepthKey struct{}

// AppRunner runs the workflow of another app for workflow tools: the app
// is loaded from apps, checked to be a workflow app, and run to its end on
// the engine newEngine gives, without recording the run. Workflows calling
// workflows are refused past a depth of five.
func AppRunner(store *apps.Store, newEngine func() *Engine) tools.WorkflowRunner {
	return func(ctx context.Context, appID, userID string, inputs map[string]any) (map[string]any, error) {
		depth, _ := ctx.Value(toolDepthKey{}).(int)
		if depth >= maxToolDepth {
			return nil, fmt.Errorf("workflows call each other as tools more than %d levels deep", maxToolDepth)
		}
		ctx = context.WithValue(ctx, toolDepthKey{}, depth+1)
		app, err := store.Get(ctx, appID)
		if err != nil {
			return nil, fmt.Errorf("the app %s cannot be loaded: %v", appID, err)
		}
		def, err := apps.Parse([]byte(app.Definition))
		if err != nil {
			return nil, fmt.Errorf("the definition of app %s cannot be read: %v", appID, err)
		}
		if def.App.Mode != apps.ModeWorkflow || def.Workflow == nil {
			return nil, fmt.Errorf("the app %s is a %s app, not a workflow", appID, def.App.Mode)
		}
		e := *newEngine()
		e.Store = nil
		res, err := e.Run(ctx, RunInput{Workflow: def.Workflow, Mode: ModeWorkflow, Inputs: inputs, UserID: userID, AppID: appID}, nil)
		if err != nil {
			return nil, err
		}
		if res.Status != RunSucceeded && res.Status != RunPartialSucceeded {
			msg := res.Error
			if msg == "" {
				msg = "the run ended as " + res.Status
			}
			return nil, errors.New(msg)
		}
		return plainMap(res.Outputs), nil
	}
}
