package codeworker

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/dop251/goja"

	"appkb/internal/platform/jsonnum"
	"appkb/internal/platform/jsontext"
)

// MaxJSONDepth bounds how deeply the text given to JSON.parse may nest:
// goja parses nested arrays and objects by recursion, and a few megabytes
// of brackets would overflow the worker's stack.
const MaxJSONDepth = 512

// runJS runs a javascript job: the code defines main, which receives one
// object holding the variables and must return an object.
func runJS(j *Job) *Answer {
	limit := j.Timeout
	vm := goja.New()
	if j.MaxCallDepth > 0 {
		vm.SetMaxCallStackSize(j.MaxCallDepth)
	}
	guardJSONParse(vm)
	timer := time.AfterFunc(limit, func() { vm.Interrupt(fmt.Sprintf("the code ran longer than %s", limit)) })
	defer timer.Stop()
	if j.MemoryBudget > 0 {
		defer watchMemory(j.MemoryBudget, func() {
			vm.Interrupt(fmt.Sprintf("the code used more than %d MB of memory", j.MemoryBudget>>20))
		})()
	}
	fail := func(err error) *Answer {
		var intr *goja.InterruptedError
		if errors.As(err, &intr) {
			return codeErr("The code was interrupted: %v", intr.Value())
		}
		return codeErr("The code failed: %v", err)
	}
	var err error
	if prg := compiledJS(j.Source); prg != nil {
		_, err = vm.RunProgram(prg)
	} else { // does not compile: RunString reports the error as a script sees it
		_, err = vm.RunString(j.Source)
	}
	if err != nil {
		return fail(err)
	}
	main, ok := goja.AssertFunction(vm.Get("main"))
	if !ok {
		return codeErr("The code does not define a function main.")
	}
	args := j.Vars
	if args == nil {
		args = map[string]any{}
	}
	res, err := main(goja.Undefined(), vm.ToValue(args))
	if err != nil {
		return fail(err)
	}
	m, ok := jsonnum.Plain(res.Export()).(map[string]any)
	if !ok {
		return codeErr("main must return an object, not %s.", res.ExportType())
	}
	if b, err := json.Marshal(m); err != nil || (j.MaxOutput > 0 && len(b) > j.MaxOutput) {
		return &Answer{ErrType: "OutputValidationError", ErrMsg: fmt.Sprintf("The code returned more than %d bytes of output.", j.MaxOutput)}
	}
	return &Answer{Result: m}
}

func codeErr(format string, args ...any) *Answer {
	return &Answer{ErrType: "CodeNodeError", ErrMsg: fmt.Sprintf(format, args...)}
}

// guardJSONParse replaces JSON.parse with one that first checks how deeply
// the text nests, then hands it to goja's own.
func guardJSONParse(vm *goja.Runtime) {
	obj, ok := vm.Get("JSON").(*goja.Object)
	if !ok {
		return
	}
	orig, ok := goja.AssertFunction(obj.Get("parse"))
	if !ok {
		return
	}
	parse := func(call goja.FunctionCall) goja.Value {
		text := call.Argument(0).String()
		if jsonDepth(text, MaxJSONDepth) > MaxJSONDepth {
			ctor, _ := goja.AssertConstructor(vm.Get("SyntaxError"))
			if ctor != nil {
				if e, err := ctor(nil, vm.ToValue(fmt.Sprintf("JSON.parse: the text nests deeper than %d levels", MaxJSONDepth))); err == nil {
					panic(e)
				}
			}
			panic(vm.NewTypeError("JSON.parse: the text nests deeper than %d levels", MaxJSONDepth))
		}
		v, err := orig(call.This, vm.ToValue(text), call.Argument(1))
		if err != nil {
			var ex *goja.Exception
			if errors.As(err, &ex) {
				panic(ex.Value())
			}
			panic(vm.NewGoError(err))
		}
		return v
	}
	fn := vm.ToValue(parse).(*goja.Object)
	_ = fn.DefineDataProperty("name", vm.ToValue("parse"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = fn.DefineDataProperty("length", vm.ToValue(2), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = obj.DefineDataProperty("parse", fn, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}

// jsonDepth returns how deeply brackets nest in text outside strings,
// stopping once it passes limit.
func jsonDepth(text string, limit int) int {
	depth, deepest := 0, 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '"':
			i = jsontext.StringEnd(text, i) - 1
		case '[', '{':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case ']', '}':
			depth--
		}
	}
	return deepest
}

// jsPrograms keeps compiled JavaScript by source text. A goja.Program is
// not tied to a runtime.
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

// watchMemory calls over once the heap has grown by more than budget
// since it was called; before it does, it collects garbage once, so that
// garbage alone does not count. The returned function stops the watch.
func watchMemory(budget uint64, over func()) (stop func()) {
	start := heapBytes()
	done := make(chan struct{})
	go func() {
		defer func() { _ = recover() }()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if heapBytes() <= start+budget {
				continue
			}
			runtime.GC()
			if heapBytes() > start+budget {
				over()
				return
			}
		}
	}()
	return func() { close(done) }
}
