package codeworker

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/config"
	gexec "github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// MaxMacroDepth bounds how deeply template macros may call one another:
// each call nests the renderer on the Go stack.
const MaxMacroDepth = 200

// errTemplateBudget ends a render that went over its output or time budget.
var errTemplateBudget = errors.New("template budget exceeded")

// budgetWriter collects template output until max characters or the
// deadline; then every write fails, which ends the render.
type budgetWriter struct {
	buf      []byte
	max      int
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
	if len(w.buf)+len(p) > w.max {
		w.fail(fmt.Sprintf("The template output is longer than %d characters.", w.max))
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

// budgetRange is range() limited to maxItems items that stops yielding
// once the render is over time; done ends its goroutines.
func budgetRange(w *budgetWriter, maxItems int, done <-chan struct{}) func(*gexec.Evaluator, *gexec.VarArgs) (<-chan int, error) {
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
		if n > maxItems {
			w.fail(fmt.Sprintf("range() may make at most %d items.", maxItems))
			return nil, gexec.ErrInvalidCall(errTemplateBudget)
		}
		if time.Now().After(w.deadline) {
			w.fail("The template took too long to render.")
			return nil, gexec.ErrInvalidCall(errTemplateBudget)
		}
		ch := make(chan int)
		go func() {
			defer func() { _ = recover() }()
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

// depthKey names the per-render counter of nested macro calls in a
// render's variables.
const depthKey = "__appkb_macro_depth__"

// jinjaEnv is the environment templates are parsed with: Jinja's
// defaults, with macros that count how deeply they nest.
var jinjaEnv = func() *gexec.Environment {
	env := *gonja.DefaultEnvironment
	env.Context = gonja.DefaultContext.Inherit()
	names := []string{"autoescape", "block", "extends", "filter", "for", "from", "if", "import", "include",
		"macro", "raw", "set", "with", "do", "break", "continue", "trans", "call"}
	set := map[string]parser.ControlStructureParser{}
	for _, n := range names {
		if p, ok := env.ControlStructures.Get(n); ok {
			set[n] = p
		}
	}
	if orig, ok := set["macro"]; ok {
		set["macro"] = func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
			cs, err := orig(p, args)
			if m, ok := cs.(*controlStructures.MacroControlStructure); ok && err == nil {
				return &countedMacro{m}, nil
			}
			return cs, err
		}
	}
	env.ControlStructures = gexec.NewControlStructureSet(set)
	return &env
}()

func macroDepthMsg(name string) string {
	return fmt.Sprintf("macro '%s' calls nest deeper than %d levels", name, MaxMacroDepth)
}

// countedMacro defines a macro whose calls fail once they nest deeper than
// MaxMacroDepth.
type countedMacro struct {
	*controlStructures.MacroControlStructure
}

func (m *countedMacro) Execute(r *gexec.Renderer, _ *nodes.ControlStructureBlock) error {
	fn, err := gexec.MacroNodeToFunc(m.Macro, r)
	if err != nil {
		return fmt.Errorf("Unable to parse macro '%s': %w", m.Name, err)
	}
	var depth *atomic.Int32
	if v, ok := r.Environment.Context.Get(depthKey); ok {
		depth, _ = v.(*atomic.Int32)
	}
	name := m.Name
	r.Environment.Context.Set(name, gexec.Macro(func(params *gexec.VarArgs) *gexec.Value {
		if depth != nil {
			if depth.Add(1) > MaxMacroDepth {
				depth.Add(-1)
				return gexec.AsValue(fmt.Errorf("%s", macroDepthMsg(name)))
			}
			defer depth.Add(-1)
		}
		return fn(params)
	}))
	return nil
}

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

func templateErr(format string, args ...any) *Answer {
	return &Answer{ErrType: "TemplateTransformNodeError", ErrMsg: fmt.Sprintf(format, args...)}
}

// runJinja renders a Jinja2 template (gonja v2) with the job's variables.
func runJinja(j *Job) *Answer {
	data := make(map[string]any, len(j.Vars)+2)
	for k, v := range j.Vars {
		data[k] = v
	}
	tpl, err := jinjaTemplates.get(j.Source, parseJinja)
	if err != nil {
		return templateErr("The template does not parse: %v", err)
	}
	limit := j.Timeout
	w := &budgetWriter{deadline: time.Now().Add(limit), max: j.MaxOutput}
	done := make(chan struct{})
	defer close(done)
	// range() knows this render's budget. It goes with the render's
	// variables, which take precedence over the environment's: a declared
	// variable named range still hides it, as it hides Jinja's own.
	if _, ok := data["range"]; !ok {
		data["range"] = budgetRange(w, j.MaxRange, done)
	}
	data[depthKey] = new(atomic.Int32)
	// The render runs aside so that a template that spins without writing
	// or calling range() still answers at the time limit; the worker is
	// then retired, which ends the render with it.
	errc := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				errc <- fmt.Errorf("panic: %v", v)
			}
		}()
		errc <- tpl.Execute(w, gexec.NewContext(data))
	}()
	t := time.NewTimer(limit + 200*time.Millisecond)
	defer t.Stop()
	select {
	case err = <-errc:
	case <-t.C:
		w.fail("The template took too long to render.")
		a := templateErr("%s", w.why())
		a.Retire = true
		return a
	}
	if why := w.why(); why != "" {
		return templateErr("%s", why)
	}
	if err != nil {
		msg := err.Error()
		// The depth error comes wrapped once per nested call: say it once.
		if i := strings.Index(msg, "macro '"); i >= 0 && strings.HasSuffix(msg, fmt.Sprintf(" calls nest deeper than %d levels", MaxMacroDepth)) {
			if j := strings.LastIndex(msg, "macro '"); j >= 0 {
				msg = msg[j:]
			}
		}
		return templateErr("The template failed: %s", msg)
	}
	return &Answer{Text: string(w.buf)}
}
