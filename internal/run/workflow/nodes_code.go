package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"appkb/internal/run/codeworker"
)

// Budgets of code nodes. JavaScript runs out of process, in a worker of
// package codeworker whose hard limits end it (not the server) when code
// runs away; inside it the code also gets a memory budget (the growth of
// the worker's heap while it runs) and a cap on the depth of its calls.
// The output of every code node, python3 included, is capped in size.
var (
	// JSMemoryBudget is how much the heap may grow while a javascript
	// node runs before it is stopped.
	JSMemoryBudget uint64 = 256 << 20
	// JSMaxCallDepth bounds the javascript call stack.
	JSMaxCallDepth = 2000
	// MaxCodeOutput bounds the outputs of a code node, as JSON bytes.
	MaxCodeOutput = 1 << 20
)

// runCode runs a code node. javascript runs with goja in a code worker
// (out of process) under Engine.CodeTimeout: main receives one object holding the declared
// variables and must return an object. python3 runs out of process through
// Engine.Python (a sandbox with limits of its own): main receives the
// variables as keyword arguments and must return a dict.
func runCode(x *nodeRun) (*outcome, error) {
	inputs := map[string]any{}
	for _, v := range asList2(x.d["variables"]) {
		inputs[asString(v["variable"])] = plain(x.get(selectorOf(v["value_selector"])))
	}
	lang := asString(x.d["code_language"])
	var result map[string]any
	var err error
	switch lang {
	case "javascript":
		result, err = x.runJavaScript(asString(x.d["code"]), inputs)
	case "python3", "python":
		result, err = x.runPython(asString(x.d["code"]), inputs)
	default:
		err = nodeErr("CodeNodeError", "The code node %q uses the language %q, which is not supported.", x.n.title, lang)
	}
	if err != nil {
		return &outcome{inputs: inputs}, err
	}
	if b, err := json.Marshal(result); err != nil || len(b) > MaxCodeOutput {
		return &outcome{inputs: inputs}, nodeErr("OutputValidationError", "The code returned more than %d bytes of output.", MaxCodeOutput)
	}
	outputs, err := checkOutputs(asMap(x.d["outputs"]), result)
	if err != nil {
		return &outcome{inputs: inputs}, err
	}
	return &outcome{inputs: inputs, outputs: outputs}, nil
}

func (x *nodeRun) runJavaScript(code string, args map[string]any) (map[string]any, error) {
	limit := x.r.e.CodeTimeout
	if limit <= 0 {
		limit = DefaultCodeTimeout
	}
	a, err := codeworker.Default().Run(x.ctx, &codeworker.Job{
		Kind: codeworker.KindJavaScript, Source: code, Vars: args, Timeout: limit,
		MaxOutput: MaxCodeOutput, MaxCallDepth: JSMaxCallDepth, MemoryBudget: JSMemoryBudget,
	})
	if err != nil {
		return nil, nodeErr("CodeNodeError", "%s", workerFailure("The code", limit, err))
	}
	if a.ErrType != "" {
		return nil, nodeErr(a.ErrType, "%s", a.ErrMsg)
	}
	return a.Result, nil
}

// workerFailure says why a code worker gave no answer, in the words the
// node used when it ran in process; what is the subject ("The code", "The
// template").
func workerFailure(what string, limit time.Duration, err error) string {
	var f *codeworker.Failure
	if !errors.As(err, &f) {
		return fmt.Sprintf("%s failed: %v", what, err)
	}
	switch f.Kind {
	case codeworker.FailTimeout:
		if what == "The template" {
			return "The template took too long to render."
		}
		return fmt.Sprintf("%s was interrupted: the code ran longer than %s", what, limit)
	case codeworker.FailStopped:
		return what + " was interrupted: the run was stopped"
	case codeworker.FailMemory:
		return fmt.Sprintf("%s used more memory than allowed (%d MB) and was stopped.", what, f.MemoryLimit>>20)
	case codeworker.FailStack:
		return what + " crashed: its calls nested too deeply (stack overflow)."
	case codeworker.FailUnavailable:
		return fmt.Sprintf("%s could not run: %s.", what, f.Detail)
	}
	if f.Detail != "" {
		return fmt.Sprintf("%s crashed: %s.", what, f.Detail)
	}
	return what + " crashed."
}

// runPython hands python3 code to Engine.Python. Without one the node
// fails: python code never runs outside a sandbox.
func (x *nodeRun) runPython(code string, args map[string]any) (map[string]any, error) {
	if x.r.e.Python == nil {
		return nil, nodeErr("CodeNodeError", "The code node %q uses python3, which is not available yet on this server: no python sandbox is configured (it needs bubblewrap).", x.n.title)
	}
	res, err := x.r.e.Python.Run(x.ctx, code, args)
	if err != nil {
		return nil, nodeErr("CodeNodeError", "The code failed: %v", err)
	}
	if res == nil {
		return nil, nodeErr("CodeNodeError", "main must return a dict.")
	}
	return plainMap(res), nil
}

// checkOutputs keeps the declared outputs of a code node and checks their
// types. A declared output must be present; null is accepted.
func checkOutputs(decl map[string]any, got map[string]any) (map[string]any, error) {
	if len(decl) == 0 {
		return got, nil
	}
	names := make([]string, 0, len(decl))
	for k := range decl {
		names = append(names, k)
	}
	sort.Strings(names)
	out := map[string]any{}
	for _, name := range names {
		t := asString(asMap(decl[name])["type"])
		v, ok := got[name]
		if !ok {
			return nil, nodeErr("OutputValidationError", "The code returned no output %q.", name)
		}
		if v != nil && t != "" && !typeMatches(t, v) {
			return nil, nodeErr("OutputValidationError", "The output %q must be of type %s, not %s.", name, t, TypeOf(v))
		}
		if t == TypeNumber || strings.HasPrefix(t, "array[number") {
			v = coerce(t, v)
		}
		out[name] = v
	}
	return out, nil
}
