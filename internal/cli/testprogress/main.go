// Command testprogress reads `go test -json` on standard input and prints
// what a person watching `make test` needs: each package as it finishes (go
// test's own "ok"/"FAIL" lines), the output of every failing test, a line
// every 20 s naming the packages still running, the ten slowest packages,
// and a closing "tests: N passed, N failed, N skipped" line. It exits 1 when
// any test or package failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type pkgState struct {
	started time.Time
	output  map[string][]string // per test, kept until it passes or fails
	done    bool
	elapsed float64
}

type report struct {
	mu                      sync.Mutex
	out                     io.Writer
	pkgs                    map[string]*pkgState
	passed, failed, skipped int
	pkgFailed               bool
	lastPrint               time.Time
	start                   time.Time
	now                     func() time.Time
}

func newReport(out io.Writer) *report {
	now := time.Now()
	return &report{out: out, pkgs: map[string]*pkgState{}, now: time.Now, lastPrint: now, start: now}
}

func (r *report) pkg(name string) *pkgState {
	p := r.pkgs[name]
	if p == nil {
		p = &pkgState{started: r.now(), output: map[string][]string{}}
		r.pkgs[name] = p
	}
	return p
}

func (r *report) printf(format string, args ...any) {
	fmt.Fprintf(r.out, format, args...)
	r.lastPrint = r.now()
}

// handle takes one event of go test's JSON stream.
func (r *report) handle(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Package == "" {
		// Build output outside any package (go test -json prints it as is).
		if e.Output != "" {
			r.printf("%s", e.Output)
		}
		return
	}
	p := r.pkg(e.Package)
	switch {
	case e.Test != "" && e.Action == "output":
		p.output[e.Test] = append(p.output[e.Test], e.Output)
	case e.Test != "" && e.Action == "pass":
		r.passed++
		delete(p.output, e.Test)
	case e.Test != "" && e.Action == "skip":
		r.skipped++
		delete(p.output, e.Test)
	case e.Test != "" && e.Action == "fail":
		r.failed++
		// Subtests' lines belong to the parent too; print the failing test's own.
		r.printf("%s", strings.Join(p.output[e.Test], ""))
		delete(p.output, e.Test)
	case e.Test == "" && e.Action == "output":
		// Package-level lines: "ok  \tpkg\t1.2s", "FAIL", build errors,
		// panics; go test prints no "PASS" for a package among several.
		if e.Output != "PASS\n" {
			r.printf("%s", e.Output)
		}
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		p.done, p.elapsed = true, e.Elapsed
		if e.Action == "fail" {
			r.pkgFailed = true
			for _, lines := range p.output { // a test that never ended (panic, timeout)
				r.printf("%s", strings.Join(lines, ""))
			}
		}
		p.output = nil
	case e.Action == "build-fail":
		r.pkgFailed = true
	}
}

// tick prints which packages are still running when nothing was printed
// for a while.
func (r *report) tick(quiet time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now().Sub(r.lastPrint) < quiet {
		return
	}
	var running []string
	for name, p := range r.pkgs {
		if !p.done {
			running = append(running, fmt.Sprintf("%s (%ds)", name, int(r.now().Sub(p.started).Seconds())))
		}
	}
	sort.Strings(running)
	if len(running) == 0 {
		r.printf("… compiling, %s in (%d packages done so far)\n", r.now().Sub(r.start).Round(time.Second), len(r.pkgs))
		return
	}
	r.printf("… still running: %s\n", strings.Join(running, ", "))
}

// finish prints the slowest packages and the closing counts.
func (r *report) finish() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	type slow struct {
		name string
		s    float64
	}
	var all []slow
	for name, p := range r.pkgs {
		if p.done && p.elapsed > 0 {
			all = append(all, slow{name, p.elapsed})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].s > all[j].s })
	if len(all) > 0 {
		r.printf("\nslowest packages:\n")
		for _, s := range all[:min(10, len(all))] {
			r.printf("  %7.1fs  %s\n", s.s, s.name)
		}
	}
	ok := r.failed == 0 && !r.pkgFailed
	r.printf("tests: %d passed, %d failed, %d skipped\n", r.passed, r.failed, r.skipped)
	return ok
}

func main() {
	r := newReport(os.Stdout)
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r.tick(20 * time.Second)
			}
		}
	}()
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			r.handle(event{Output: string(line) + "\n"}) // not JSON: go's own messages
			continue
		}
		r.handle(e)
	}
	close(stop)
	if !r.finish() {
		os.Exit(1)
	}
}
