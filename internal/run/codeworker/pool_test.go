package codeworker

import (
	"context"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWireKeepsValues sends values through the codec both ways and checks
// they come back exactly (numbers included), and that a value nested too
// deeply or a truncated frame is refused.
func TestWireKeepsValues(t *testing.T) {
	vals := map[string]any{
		"nil": nil, "t": true, "f": false, "n": 1.5, "big": 1e300, "neg0": math.Copysign(0, -1),
		"s": "héllo\x00", "list": []any{1.0, "a", []any{}, map[string]any{}}, "m": map[string]any{"k": []any{nil}},
	}
	j := &Job{Kind: KindJinja, Source: "{{ x }}", Vars: vals, Timeout: 3 * time.Second, MaxOutput: 7, MaxCallDepth: 9, MemoryBudget: 11, MaxRange: 13}
	b, err := j.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeJob(b[4:])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, j) {
		t.Fatalf("got %#v\nwant %#v", got, j)
	}
	a := &Answer{Result: map[string]any{"nan": math.NaN()}, Text: "t", ErrType: "E", ErrMsg: "m", Retire: true}
	b, err = a.encode()
	if err != nil {
		t.Fatal(err)
	}
	ga, err := decodeAnswer(b[4:])
	if err != nil || ga.Text != "t" || ga.ErrType != "E" || ga.ErrMsg != "m" || !ga.Retire || !math.IsNaN(ga.Result["nan"].(float64)) {
		t.Fatalf("answer %#v, %v", ga, err)
	}
	if _, err := decodeAnswer(b[4 : len(b)-3]); err == nil {
		t.Error("a truncated answer was read")
	}
	var deep any = map[string]any{}
	for range MaxDepth + 1 {
		deep = []any{deep}
	}
	if _, err := (&Job{Vars: map[string]any{"d": deep}}).encode(); err == nil {
		t.Error("a value nested deeper than MaxDepth was sent")
	}
}

// TestJobs runs jobs through a pool of real workers and checks answers and
// failures.
func TestJobs(t *testing.T) {
	p := &Pool{Idle: 1}
	t.Cleanup(p.Stop)
	tests := []struct {
		name     string
		job      Job
		wantText string
		wantRes  map[string]any
		wantErr  string // in ErrMsg
		wantFail FailKind
	}{
		{name: "template", job: Job{Kind: KindJinja, Source: "{{ a }}-{{ b|length }}", Vars: map[string]any{"a": "x", "b": []any{1.0, 2.0}}}, wantText: "x-2"},
		{name: "javascript", job: Job{Kind: KindJavaScript, Source: "function main({a}) { return {r: a * 2, s: [1, 'x', null]} }", Vars: map[string]any{"a": 21.0}},
			wantRes: map[string]any{"r": 42.0, "s": []any{1.0, "x", nil}}},
		{name: "JSON.parse still parses", job: Job{Kind: KindJavaScript, Source: `function main() { return JSON.parse('{"a": [1, {"b": "]"}]}', (k, v) => v) }`},
			wantRes: map[string]any{"a": []any{1.0, map[string]any{"b": "]"}}}},
		{name: "JSON.parse too deep", job: Job{Kind: KindJavaScript, Source: `function main() { try { JSON.parse("[".repeat(600) + "]".repeat(600)) } catch (e) { return {n: e.name} } }`},
			wantRes: map[string]any{"n": "SyntaxError"}},
		{name: "output over its cap", job: Job{Kind: KindJavaScript, Source: `function main() { return {o: "x".repeat(100)} }`, MaxOutput: 50}, wantErr: "more than 50 bytes of output"},
		{name: "macros nested too deeply", job: Job{Kind: KindJinja, Source: `{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}`}, wantErr: "The template failed: macro 'f' calls nest deeper than 200 levels"},
		{name: "macros nested within the limit", job: Job{Kind: KindJinja, Source: `{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}ok{% endif %}{% endmacro %}{{ f(150) }}`}, wantText: "ok"},
		{name: "a native loop is killed at the time limit", job: Job{Kind: KindJavaScript, Source: `function main() { return {n: Array.prototype.indexOf.call({length: 2**53 - 1}, 1)} }`, Timeout: 200 * time.Millisecond}, wantFail: FailTimeout},
		{name: "memory runs out", job: Job{Kind: KindJavaScript, Source: `function main() { return {n: "a".repeat(1.2e9).length} }`}, wantFail: FailMemory},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if raceBuild && tc.wantFail == FailMemory {
				t.Skip("a race-detector build has no address-space limit (see setLimits)")
			}
			j := tc.job
			if j.Timeout == 0 {
				j.Timeout = 5 * time.Second
			}
			if j.MaxOutput == 0 {
				j.MaxOutput = 1 << 20
			}
			if j.MaxRange == 0 {
				j.MaxRange = 1000
			}
			a, err := p.Run(context.Background(), &j)
			if tc.wantFail != 0 {
				f, ok := err.(*Failure)
				if !ok || f.Kind != tc.wantFail {
					t.Fatalf("answer %+v, err %v; want failure %d", a, err, tc.wantFail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" {
				if !strings.Contains(a.ErrMsg, tc.wantErr) {
					t.Fatalf("error %q %q, want %q", a.ErrType, a.ErrMsg, tc.wantErr)
				}
				return
			}
			if a.ErrMsg != "" || a.Text != tc.wantText || !reflect.DeepEqual(a.Result, tc.wantRes) {
				t.Fatalf("answer %+v, want text %q result %v", a, tc.wantText, tc.wantRes)
			}
		})
	}
}

// TestWorkersAreReusedAndCapped checks that sequential jobs share a worker
// (its compiled-program cache answers), that concurrent jobs beyond Max
// wait rather than fail, and that a cancelled wait ends.
func TestWorkersAreReusedAndCapped(t *testing.T) {
	p := &Pool{Idle: 1, Max: 2}
	t.Cleanup(p.Stop)
	js := func(src string, timeout time.Duration) *Job {
		return &Job{Kind: KindJavaScript, Source: src, Timeout: timeout, MaxOutput: 1 << 20}
	}
	// A global counter survives in the worker's process only if the
	// runtime were shared; it must not be.
	for i := range 3 {
		a, err := p.Run(context.Background(), js("var n = (typeof n === 'undefined' ? 0 : n) + 1; function main() { return {n: n} }", time.Second))
		if err != nil || a.Result["n"] != 1.0 {
			t.Fatalf("run %d: %+v %v", i, a, err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := p.Run(context.Background(), js("function main() { const t = Date.now(); while (Date.now() - t < 100) {} return {ok: true} }", 5*time.Second))
			if err == nil && a.Result["ok"] != true {
				err = &Failure{Kind: FailCrash, Detail: a.ErrMsg}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("job %d: %v", i, err)
		}
	}
	p.mu.Lock()
	running := p.running
	p.mu.Unlock()
	if running > 2 {
		t.Errorf("%d workers running, Max is 2", running)
	}
	// Both workers busy: a third job waits until its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	for range 2 {
		go func() {
			p.Run(ctx, js("function main() { for(;;){} }", time.Minute))
			done <- struct{}{}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := p.Run(ctx, js("function main() { return {} }", time.Second))
	if f, ok := err.(*Failure); !ok || f.Kind != FailStopped {
		t.Fatalf("err %v, want stopped", err)
	}
	<-done
	<-done
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("the stopped jobs ended after %v", took)
	}
}

func TestJSONDepth(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{`[]`, 1}, {`{"a": [[1]]}`, 3}, {`"[[[["`, 0}, {`["\"[[["]`, 1}, {`[1, [2], {"x": [3]}]`, 3},
	}
	for _, tc := range tests {
		if got := jsonDepth(tc.text, 100); got != tc.want {
			t.Errorf("jsonDepth(%s) = %d, want %d", tc.text, got, tc.want)
		}
	}
}
