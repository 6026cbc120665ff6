package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// Budgets of code nodes. JavaScript runs inside the server process, so
// besides its time limit it gets a memory budget (the growth of the
// process's heap while it runs, checked every few milliseconds) and a cap
// on the depth of its calls. The output of every code node, python3
// included, is capped in size.
var (
	// JSMemoryBudget is how much the heap may grow while a javascript
	// node runs before it is stopped.
	JSMemoryBudget uint64 = 256 << 20
	// JSMaxCallDepth bounds the javascript call stack.
	JSMaxCallDepth = 2000
	// MaxCodeOutput bounds the outputs of a code node, as JSON bytes.
	MaxCodeOutput = 1 << 20
)

// runCode runs a code node. javascript runs in-process with goja under
// Engine.CodeTimeout: main receives one object holding the declared
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
	vm := goja.New()
	vm.SetMaxCallStackSize(JSMaxCallDepth)
	timer := time.AfterFunc(limit, func() { vm.Interrupt(fmt.Sprintf("the code ran longer than %s", limit)) })
	defer timer.Stop()
	defer watchMemory(func() {
		vm.Interrupt(fmt.Sprintf("the code used more than %d MB of memory", JSMemoryBudget>>20))
	})()
	stop := contextAfter(x, func() { vm.Interrupt("the run was stopped") })
	defer stop()
	fail := func(err error) error {
		var intr *goja.InterruptedError
		if errors.As(err, &intr) {
			return nodeErr("CodeNodeError", "The code was interrupted: %v", intr.Value())
		}
		return nodeErr("CodeNodeError", "The code failed: %v", err)
	}
	var err error
	if prg := compiledJS(code); prg != nil {
		_, err = vm.RunProgram(prg)
	} else { // does not compile: RunString reports the error as a script sees it
		_, err = vm.RunString(code)
	}
	if err != nil {
		return nil, fail(err)
	}
	main, ok := goja.AssertFunction(vm.Get("main"))
	if !ok {
		return nil, nodeErr("CodeNodeError", "The code does not define a function main.")
	}
	res, err := main(goja.Undefined(), vm.ToValue(args))
	if err != nil {
		return nil, fail(err)
	}
	m, ok := plain(res.Export()).(map[string]any)
	if !ok {
		return nil, nodeErr("CodeNodeError", "main must return an object, not %s.", res.ExportType())
	}
	return m, nil
}

// jsPrograms keeps code nodes' compiled JavaScript by source text. A
// goja.Program is not tied to a runtime and may run in several at once.
var jsPrograms = textCache[*goja.Program]{size: 256}

// compiledJS returns code compiled, or nil when it does not compile.
func compiledJS(code string) *goja.Program {
	prg, err := jsPrograms.get(code, func(code string) (*goja.Program, error) {
		return goja.Compile("", code, false)
	})
	if err != nil {
		return nil
	}
	return prg
}

// heapBytes reads the bytes of heap objects (live and not yet swept).
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// gcMu lets one watcher at a time force a collection.
var gcMu sync.Mutex

// watchMemory calls over once the heap has grown by more than
// JSMemoryBudget since it was called; before it does, it collects garbage
// once, so that garbage alone does not count. The returned function stops
// the watch.
func watchMemory(over func()) (stop func()) {
	start := heapBytes()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if heapBytes() <= start+JSMemoryBudget {
				continue
			}
			gcMu.Lock()
			if heapBytes() > start+JSMemoryBudget {
				runtime.GC()
			}
			gcMu.Unlock()
			if heapBytes() > start+JSMemoryBudget {
				over()
				return
			}
		}
	}()
	return func() { close(done) }
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

// contextAfter calls f when the node's context ends, until the returned
// function is called.
func contextAfter(x *nodeRun, f func()) func() {
	done := make(chan struct{})
	go func() {
		select {
		case <-x.ctx.Done():
			f()
		case <-done:
		}
	}()
	return func() { close(done) }
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
