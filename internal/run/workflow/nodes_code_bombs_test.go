package workflow

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// vmRSS reads this process's resident memory in bytes.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestHostileCodeFailsTheNodeOnly runs code and templates written to take
// the server down (stack overflows, huge allocations, loops inside native
// calls): each fails its node with a reason within its time limit and a
// second, while this process goes on and barely grows.
func TestHostileCodeFailsTheNodeOnly(t *testing.T) {
	if raceDetector {
		t.Skip("the code workers of a race-detector build have no address-space limit (codeworker.setLimits)")
	}
	endQ := `
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [x, output]}]}`
	code := func(src string) string {
		return graph(`
  - id: x
    data: {type: code, title: C, code_language: javascript, code: '`+strings.ReplaceAll(src, "'", "''")+`', outputs: {}}`+endQ,
			edge("start", "source", "x"), edge("x", "source", "end"))
	}
	tmpl := func(src string) string {
		return graph(`
  - id: x
    data: {type: template-transform, title: T, template: '`+strings.ReplaceAll(src, "'", "''")+`', variables: []}`+endQ,
			edge("start", "source", "x"), edge("x", "source", "end"))
	}
	const limit = 2 * time.Second
	tests := []struct {
		name    string
		src     string
		wantErr []string // the error contains one of these
	}{
		{"recursive macro", tmpl(`{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}`), []string{"nest deeper than 200 levels"}},
		{"center by a billion", tmpl(`{{ "x"|center(1000000000) }}`), []string{"more memory than allowed", "longer than 400000 characters"}},
		{"a billion-character string's length", tmpl(`{{ ("ab"*500000000)|length }}`), []string{"more memory than allowed"}},
		{"a billion-character string", tmpl(`{{ "a"*1000000000 }}`), []string{"more memory than allowed", "longer than 400000 characters"}},
		{"nested loops", tmpl(`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`), []string{"took too long"}},
		{"repeat 1.2e9", code(`function main() { return {output: "a".repeat(1.2e9).length} }`), []string{"more memory than allowed", "more than 256 MB of memory"}},
		{"padEnd 1e9", code(`function main() { return {output: "".padEnd(1e9).length} }`), []string{"more memory than allowed", "more than 256 MB of memory"}},
		{"a gigabyte typed array", code(`function main() { return {output: new Uint8Array(1<<30).fill(0).length} }`), []string{"more memory than allowed", "more than 256 MB of memory"}},
		{"an array of 6e7", code(`function main() { return {output: new Array(6e7).fill(0).length} }`), []string{"more memory than allowed", "more than 256 MB of memory", "ran longer than 2s"}},
		{"join over 1e7 items", code(`function main() { const a = new Array(1e7).fill("abcdefghij"); let s = ""; for (let i = 0; i < 50; i++) s = a.join(s.slice(0, 10)); return {output: s.length} }`),
			[]string{"more memory than allowed", "more than 256 MB of memory", "ran longer than 2s"}},
		{"JSON.parse of 9.5 MB of brackets", code(`function main() { return {output: JSON.parse("[".repeat(4750000) + "]".repeat(4750000))} }`), []string{"nests deeper than 512 levels"}},
		{"catastrophic regex", code(`function main() { return {output: /^(?=a)(a+)+$/.test("a".repeat(40) + "b")} }`), []string{"ran longer than 2s"}},
		{"indexOf on a huge array-like", code(`function main() { return {output: Array.prototype.indexOf.call({length: 2**53 - 1}, 1)} }`), []string{"ran longer than 2s"}},
		{"a million-deep object", code(`function main() { let o = {}; for (let i = 0; i < 1e6; i++) o = {a: o}; return {output: o} }`),
			[]string{"stack overflow", "nested deeper than", "ran longer than 2s", "more memory than allowed", "more than 256 MB of memory"}},
	}
	runtime.GC()
	before := vmRSS(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rss := vmRSS(t)
			start := time.Now()
			res, _ := run1(t, &Engine{CodeTimeout: limit}, RunInput{Workflow: graphYAML(t, tc.src), Inputs: map[string]any{"q": "x"}, UserID: "u"})
			took := time.Since(start)
			t.Logf("%s in %v, this process grew by %d MB: %s", res.Status, took.Round(time.Millisecond), (vmRSS(t)-rss)>>20, res.Error)
			ok := false
			for _, w := range tc.wantErr {
				ok = ok || strings.Contains(res.Error, w)
			}
			if res.Status != RunFailed || !ok {
				t.Fatalf("status %s, error %q; want failed with one of %q", res.Status, res.Error, tc.wantErr)
			}
			if took > limit+time.Second {
				t.Errorf("took %v, more than the time limit and a second", took)
			}
		})
	}
	runtime.GC()
	if grew := vmRSS(t) - before; grew > 100<<20 {
		t.Errorf("this process grew by %d MB", grew>>20)
	} else {
		t.Logf("this process grew by %d MB", grew>>20)
	}
}

// TestStopEndsBusyCode stops runs whose code is busy where goja cannot
// interrupt it (inside one native call) and checks that each run ends
// within a second.
func TestStopEndsBusyCode(t *testing.T) {
	tests := []struct{ name, node string }{
		{"javascript in a native loop", `{type: code, title: C, code_language: javascript, code: 'function main() { return {n: Array.prototype.indexOf.call({length: 2**53 - 1}, 1)} }', outputs: {}}`},
		{"javascript in a loop", `{type: code, title: C, code_language: javascript, code: 'function main() { for(;;){} }', outputs: {}}`},
		{"a template in nested loops", `{type: template-transform, title: T, template: '{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}', variables: []}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := graphYAML(t, graph(`
  - id: x
    data: `+tc.node, edge("start", "source", "x")))
			ctx, cancel := context.WithCancel(context.Background())
			const after = 300 * time.Millisecond
			time.AfterFunc(after, cancel)
			start := time.Now()
			res, err := (&Engine{CodeTimeout: time.Minute}).Run(ctx, RunInput{Workflow: w, Inputs: map[string]any{"q": "x"}}, nil)
			if err != nil || res.Status != RunStopped {
				t.Fatalf("res %+v err %v, want stopped", res, err)
			}
			if took := time.Since(start) - after; took > time.Second {
				t.Errorf("the run ended %v after it was stopped", took)
			}
		})
	}
}
