package workflow

import "appkb/internal/run/codeworker"

// maxTemplateOutput bounds the text a template may produce.
const maxTemplateOutput = 400_000

// MaxTemplateRange is the longest sequence range() may make in a template.
var MaxTemplateRange = 100_000

// renderJinja renders a Jinja2 template (gonja v2) with the declared
// variables, in a code worker (out of process). Templates are loaded from
// memory only, so include, import and extends cannot read files.
func (x *nodeRun) renderJinja(src string, vars []map[string]any) (string, error) {
	data := map[string]any{}
	for _, v := range vars {
		name := asString(v["variable"])
		if name == "" {
			continue
		}
		data[name] = plain(x.get(selectorOf(v["value_selector"])))
	}
	limit := x.r.e.CodeTimeout
	if limit <= 0 {
		limit = DefaultCodeTimeout
	}
	a, err := codeworker.Default().Run(x.ctx, &codeworker.Job{
		Kind: codeworker.KindJinja, Source: src, Vars: data, Timeout: limit,
		MaxOutput: maxTemplateOutput, MaxRange: MaxTemplateRange,
	})
	if err != nil {
		return "", nodeErr("TemplateTransformNodeError", "%s", workerFailure("The template", limit, err))
	}
	if a.ErrType != "" {
		return "", nodeErr(a.ErrType, "%s", a.ErrMsg)
	}
	return a.Text, nil
}

func runTemplate(x *nodeRun) (*outcome, error) {
	vars := asList2(x.d["variables"])
	inputs := map[string]any{}
	for _, v := range vars {
		inputs[asString(v["variable"])] = plain(x.get(selectorOf(v["value_selector"])))
	}
	out, err := x.renderJinja(asString(x.d["template"]), vars)
	if err != nil {
		return &outcome{inputs: inputs}, err
	}
	return &outcome{inputs: inputs, outputs: map[string]any{"output": out}}, nil
}
