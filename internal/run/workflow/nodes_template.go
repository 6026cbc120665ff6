package workflow

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	gexec "github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// maxTemplateOutput bounds the text a template may produce.
const maxTemplateOutput = 400_000

// MaxTemplateRange is the longest sequence range() may make in a template.
var MaxTemplateRange = 100_000

// errTemplateBudget ends a render that went over its output or time budget.
var errTemplateBudget = errors.New("template budget exceeded")

// budgetWriter collects template output until maxTemplateOutput or the
// deadline; then every write fails, which ends the render.
type budgetWriter struct {
	buf      []byte
	deadline time.Time
	mu       sync.Mutex
	reason   string
}

// fail records why the render is over budget (the first reason wins).
func (w *budgetWriter) fail(why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reason == "" {
		w.reason = why
	}
}

func (w *budgetWriter) why() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

func (w *budgetWriter) Write(p []byte) (int, error) {
	if len(w.buf)+len(p) > maxTemplateOutput {
		w.fail(fmt.Sprintf("The template output is longer than %d characters.", maxTemplateOutput))
	}
	if time.Now().After(w.deadline) {
		w.fail("The template took too long to render.")
	}
	if w.why() != "" {
		return 0, errTemplateBudget
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// budgetRange is range() limited to MaxTemplateRange items that stops
// yielding once the render is over time; done ends its goroutines.
func budgetRange(w *budgetWriter, done <-chan struct{}) func(*gexec.Evaluator, *gexec.VarArgs) (<-chan int, error) {
	return func(_ *gexec.Evaluator, params *gexec.VarArgs) (<-chan int, error) {
		start, stop, step := 0, 0, 1
		ints := make([]int, len(params.Args))
		for i, a := range params.Args {
			if !a.IsInteger() {
				return nil, gexec.ErrInvalidCall(errors.New("range takes [start, ]stop[, step] as integers"))
			}
			ints[i] = a.Integer()
		}
		switch len(ints) {
		case 1:
			stop = ints[0]
		case 2:
			start, stop = ints[0], ints[1]
		case 3:
			start, stop, step = ints[0], ints[1], ints[2]
		default:
			return nil, gexec.ErrInvalidCall(errors.New("range takes [start, ]stop[, step] as integers"))
		}
		if step == 0 {
			return nil, gexec.ErrInvalidCall(errors.New("range step must not be 0"))
		}
		n := 0
		if step > 0 && stop > start {
			n = (stop - start + step - 1) / step
		} else if step < 0 && stop < start {
			n = (start - stop - step - 1) / -step
		}
		if n > MaxTemplateRange {
			w.fail(fmt.Sprintf("range() may make at most %d items.", MaxTemplateRange))
			return nil, gexec.ErrInvalidCall(errTemplateBudget)
		}
		if time.Now().After(w.deadline) {
			w.fail("The template took too long to render.")
			return nil, gexec.ErrInvalidCall(errTemplateBudget)
		}
		ch := make(chan int)
		go func() {
			defer close(ch)
			for i, v := 0, start; i < n; i, v = i+1, v+step {
				if i&1023 == 1023 && time.Now().After(w.deadline) {
					return
				}
				select {
				case ch <- v:
				case <-done:
					return
				}
			}
		}()
		return ch, nil
	}
}

// jinjaTemplates keeps parsed templates by source text. A parsed template
// keeps no state of its renders: each render gets its own context.
var jinjaTemplates = textCache[*gexec.Template]{size: 256}

// jinjaEnv is the environment templates are parsed with: Jinja's defaults.
var jinjaEnv = func() *gexec.Environment {
	env := *gonja.DefaultEnvironment
	env.Context = gonja.DefaultContext.Inherit()
	return &env
}()

// parseJinja parses a template held in memory, so include, import and
// extends cannot read files.
func parseJinja(src string) (*gexec.Template, error) {
	const root = "/template"
	loader, err := loaders.NewMemoryLoader(map[string]string{root: src})
	if err != nil {
		return nil, err
	}
	return gexec.NewTemplate(root, config.New(), loader, jinjaEnv)
}

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
	tpl, err := jinjaTemplates.get(src, parseJinja)
	if err != nil {
		return "", nodeErr("TemplateTransformNodeError", "The template does not parse: %v", err)
	}
	limit := x.r.e.CodeTimeout
	if limit <= 0 {
		limit = DefaultCodeTimeout
	}
	w := &budgetWriter{deadline: time.Now().Add(limit)}
	done := make(chan struct{})
	defer close(done)
	// range() knows this render's budget. It goes with the render's
	// variables, which take precedence over the environment's: a declared
	// variable named range still hides it, as it hides Jinja's own.
	if _, ok := data["range"]; !ok {
		data["range"] = budgetRange(w, done)
	}
	// The render runs aside so that a template that spins without writing
	// or calling range() still answers at the time limit; its writes fail
	// from then on.
	errc := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				errc <- fmt.Errorf("panic: %v", v)
			}
		}()
		errc <- tpl.Execute(w, gexec.NewContext(data))
	}()
	select {
	case err = <-errc:
	case <-time.After(limit + time.Second):
		w.fail("The template took too long to render.")
		return "", nodeErr("TemplateTransformNodeError", "%s", w.why())
	}
	if why := w.why(); why != "" {
		return "", nodeErr("TemplateTransformNodeError", "%s", why)
	}
	if err != nil {
		return "", nodeErr("TemplateTransformNodeError", "The template failed: %v", err)
	}
	return string(w.buf), nil
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
