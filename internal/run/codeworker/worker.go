package codeworker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// envWorker, set to "1" in a process's environment, makes it a worker: the
// package's init serves jobs on stdin and stdout and exits, before main (or
// a test binary's main) runs.
const envWorker = "APPKB_CODEWORKER"

// envMemory carries the worker's memory limit in bytes.
const envMemory = "APPKB_CODEWORKER_MEMORY"

// hello is the first frame a worker writes: its protocol version.
const hello = "appkb-codeworker/1"

// Exit codes of a worker that ends itself.
const (
	exitCPU      = 3 // its CPU limit was reached
	exitProtocol = 4 // the parent sent something it cannot read
)

// maxJob bounds a job frame a worker accepts.
const maxJob = 256 << 20

// MaxStack bounds a worker goroutine's stack: a recursion that runs away
// ends the worker quickly with "stack overflow".
const MaxStack = 256 << 20

func init() {
	if os.Getenv(envWorker) != "1" {
		return
	}
	os.Exit(serve())
}

// serve is a worker's life: set the limits, say hello, run jobs one at a
// time until stdin ends.
func serve() int {
	limit, _ := strconv.ParseInt(os.Getenv(envMemory), 10, 64)
	if limit <= 0 {
		limit = DefaultMemoryLimit
	}
	setLimits(limit)
	// Only the protocol goes to stdout; fd 1 itself is kept for it.
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	b := make([]byte, 4, 4+len(hello))
	b = append(b, hello...)
	if writeFrame(out, b) != nil || out.Flush() != nil {
		return exitProtocol
	}
	for {
		frame, err := readFrame(in, maxJob)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintln(os.Stderr, "codeworker: reading a job:", err)
			return exitProtocol
		}
		j, err := decodeJob(frame)
		if err != nil {
			fmt.Fprintln(os.Stderr, "codeworker: decoding a job:", err)
			return exitProtocol
		}
		limitCPU(j.Timeout)
		a := execute(j)
		b, err := a.encode()
		if err != nil {
			a = &Answer{ErrType: a.ErrType, ErrMsg: fmt.Sprintf("The code returned values nested deeper than %d levels.", MaxDepth)}
			if a.ErrType == "" {
				a.ErrType = errTypeOf(j.Kind)
			}
			b, _ = a.encode()
		}
		if writeFrame(out, b) != nil || out.Flush() != nil {
			return exitProtocol
		}
		if a.Retire {
			return 0
		}
	}
}

func errTypeOf(kind string) string {
	if kind == KindJinja {
		return "TemplateTransformNodeError"
	}
	return "CodeNodeError"
}

// execute runs one job; a panic fails the job and retires the worker.
func execute(j *Job) (a *Answer) {
	defer func() {
		if v := recover(); v != nil {
			a = &Answer{ErrType: errTypeOf(j.Kind), ErrMsg: fmt.Sprintf("The code crashed: %v", v), Retire: true}
		}
	}()
	switch j.Kind {
	case KindJavaScript:
		return runJS(j)
	case KindJinja:
		return runJinja(j)
	}
	return &Answer{ErrType: "CodeNodeError", ErrMsg: fmt.Sprintf("unknown kind of job %q", j.Kind), Retire: true}
}

// setLimits bounds the worker: the Go heap's soft limit, the address
// space (the hard wall: an allocation past it ends the worker with "out of
// memory"), the stack, and CPU time (see limitCPU).
func setLimits(limit int64) {
	debug.SetMemoryLimit(limit * 3 / 4)
	debug.SetMaxStack(MaxStack)
	// The address space already mapped (runtime, binary, thread stacks)
	// does not count against the limit.
	as := uint64(vmSize() + limit)
	cur := &syscall.Rlimit{}
	// A race-detector build (only tests are built so) keeps the Go heap's
	// soft limit alone.
	if !raceBuild && syscall.Getrlimit(syscall.RLIMIT_AS, cur) == nil && (cur.Max == ^uint64(0) || as < cur.Max) {
		_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as})
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGXCPU)
	go func() {
		<-c
		fmt.Fprintln(os.Stderr, "codeworker: CPU time limit reached")
		os.Exit(exitCPU)
	}()
}

// limitCPU sets the worker's CPU time limit to what it has used so far
// plus the job's time limit and a margin: a backstop for when the parent
// cannot kill it.
func limitCPU(timeout time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return
	}
	used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	secs := uint64((used+timeout)/time.Second) + 3
	cur := &syscall.Rlimit{}
	if syscall.Getrlimit(syscall.RLIMIT_CPU, cur) != nil {
		return
	}
	if cur.Max != ^uint64(0) && secs > cur.Max {
		secs = cur.Max
	}
	_ = syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: secs, Max: cur.Max})
}

// vmSize reads the process's mapped address space in bytes.
func vmSize() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmSize:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
