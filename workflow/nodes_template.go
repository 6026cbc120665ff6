package workflow

import (
	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	gexec "github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// maxTemplateOutput bounds the text a template may produce.
const maxTemplateOutput = 400_000

// renderJinja renders a Jinja2 template (gonja v2) with the declared
// variables. Templates are loaded from memory only, so include, import
// and extends cannot read files.
func (x *nodeRun) renderJinja(src string, vars []map[string]any) (string, error) {
	data := map[string]any{}
	for _, v := range vars {
		name := asString(v["variable"])
		if name == "" {
			continue
		}
		data[name] = plain(x.get(selectorOf(v["value_selector"])))
	}
	const root = "/template"
	loader, err := loaders.NewMemoryLoader(map[string]string{root: src})
	if err != nil {
		return "", nodeErr("TemplateTransformNodeError", "%v", err)
	}
	tpl, err := gexec.NewTemplate(root, config.New(), loader, gonja.DefaultEnvironment)
	if err != nil {
		return "", nodeErr("TemplateTransformNodeError", "The template does not parse: %v", err)
	}
	out, err := tpl.ExecuteToString(gexec.NewContext(data))
	if err != nil {
		return "", nodeErr("TemplateTransformNodeError", "The template failed: %v", err)
	}
	if len(out) > maxTemplateOutput {
		return "", nodeErr("TemplateTransformNodeError", "The template output is longer than %d characters.", maxTemplateOutput)
	}
	return out, nil
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
