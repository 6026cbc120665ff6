// Package bench holds benchmarks of appkb's chat runtime. They drive the
// real router (validation, authentication, SQLite storage) against the
// builtin offline model; see README.md for how to run them and what the
// figures mean. They assert nothing about speed.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/cli/demo"
	"appkb/internal/llm"
	"appkb/internal/wiring"
)

// server is the real HTTP handler over a fresh database with the demo apps.
type server struct {
	e   *echo.Echo
	key string // the demo chat app's key
	gdb *gorm.DB
}

func newServer(b *testing.B) *server {
	b.Helper()
	gdb, err := db.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close(gdb) })
	keys, err := demo.Ensure(context.Background(), apps.NewStore(gdb), apikeys.NewStore(gdb))
	if err != nil {
		b.Fatal(err)
	}
	return &server{e: router(b, gdb), key: keys.AppKey, gdb: gdb}
}

// router is the real API router over gdb, logging nothing.
func router(b *testing.B, gdb *gorm.DB) *echo.Echo {
	return routerWith(b, handlers.Deps{DB: gdb})
}

// routerWith is the real API router over deps, with the spec and a logger
// that logs nothing filled in.
func routerWith(b *testing.B, deps handlers.Deps) *echo.Echo {
	b.Helper()
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		b.Fatal(err)
	}
	deps.SpecYAML = spec
	deps.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := wiring.NewServer(deps)
	if err != nil {
		b.Fatal(err)
	}
	e.Logger.SetOutput(io.Discard)
	return e
}

// chatBody is a request like the ones the benchmarks send; n makes the
// query (and the end user) differ between requests.
func chatBody(n int64, mode string) string {
	return fmt.Sprintf(`{"query":"How do I reset my password, attempt %d?","inputs":{"name":"Ada"},"user":"bench-%d","response_mode":%q}`, n, n%64, mode)
}

// send serves one request in-process, fails the benchmark on a non-200
// and returns the response body.
func (s *server) send(b *testing.B, body string) []byte {
	req := httptest.NewRequest(http.MethodPost, "/v1/chat-messages", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// latencies collects per-request durations and reports percentiles.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	pct := func(p float64) float64 {
		return float64(l.d[int(p*float64(len(l.d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// cpuClock reads the CPU time the whole benchmark process has used so far
// (user and system, every thread).
func cpuClock() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per operation since since, in
// µs: on a machine that other work shares, it moves much less than the
// throughput does. It includes the in-process fake upstream and the
// clients.
func reportCPU(b *testing.B, since time.Duration, unit string) {
	b.ReportMetric(float64((cpuClock()-since).Microseconds())/float64(b.N), "cpu-µs/"+unit)
}

// BenchmarkModelCall times the builtin model alone, with a prompt like the
// one the demo app builds. Subtract it from BenchmarkBlockingChat to get
// the latency appkb adds around the model call.
func BenchmarkModelCall(b *testing.B) {
	model, err := (*llm.Registry)(nil).Chat("appkb", "builtin")
	if err != nil {
		b.Fatal(err)
	}
	req := llm.ChatRequest{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "You are a helpful assistant. Answer briefly."},
		{Role: llm.RoleUser, Content: "How do I reset my password, attempt 1?"},
	}}
	var l latencies
	for b.Loop() {
		start := time.Now()
		if _, err := model.Chat(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		l.add(time.Since(start))
	}
	l.report(b)
}

// BenchmarkBlockingChat sends blocking chat messages one after another, each
// starting a new conversation.
func BenchmarkBlockingChat(b *testing.B) {
	s := newServer(b)
	var n int64
	var l latencies
	for b.Loop() {
		n++
		start := time.Now()
		s.send(b, chatBody(n, "blocking"))
		l.add(time.Since(start))
	}
	l.report(b)
}

// BenchmarkBlockingChatParallel sends blocking chat messages from 16
// concurrent clients (8 per core on a 2-core machine; run with -cpu to
// change). msgs/s is the throughput.
func BenchmarkBlockingChatParallel(b *testing.B) {
	sendParallel(b, newServer(b), "blocking")
}

// sendParallel sends chat messages in response mode from 16 concurrent
// clients (8 per core on a 2-core machine) and reports the messages per
// second, the process's CPU time per message and latency percentiles.
func sendParallel(b *testing.B, s *server, mode string) {
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	var n atomic.Int64
	var l latencies
	start, cpu := time.Now(), cpuClock()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t := time.Now()
			s.send(b, chatBody(n.Add(1), mode))
			l.add(time.Since(t))
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	reportCPU(b, cpu, "msg")
	l.report(b)
}

// BenchmarkStreamingChat sends streaming chat messages one after another;
// the whole stream is read each time.
func BenchmarkStreamingChat(b *testing.B) {
	s := newServer(b)
	var n int64
	var l latencies
	for b.Loop() {
		n++
		start := time.Now()
		s.send(b, chatBody(n, "streaming"))
		l.add(time.Since(start))
	}
	l.report(b)
}
