package bench

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// BenchmarkEphemeralReady measures what a client's CI waits for: from
// exec of `appkb serve --ephemeral` to the first 200 of /healthz, on a new
// temporary data directory each time (the target: 100 ms). The
// binary is built once, with the Makefile's tags, before the clock runs.
//
//	go test -tags sqlite_fts5 -run '^$' -bench Ready -benchtime 20x ./bench/
//
// APPKB_READY_BIN names an appkb binary to measure instead (an older
// build, for a before/after at the same load).
func BenchmarkEphemeralReady(b *testing.B) {
	bin := os.Getenv("APPKB_READY_BIN")
	if bin == "" {
		bin = buildForReady(b, "..")
	}
	measureReady(b, func(addr string) *exec.Cmd {
		return exec.Command(bin, "serve", "--ephemeral", "--addr", addr, "--code-warm", "0")
	})
}

// BenchmarkBareReady is the floor under BenchmarkEphemeralReady on the same
// machine at the same moment: a Go program that only creates a SQLite
// database in a new temporary directory and answers /healthz
// (testdata/bareready). The difference is appkb's own start.
func BenchmarkBareReady(b *testing.B) {
	bin := buildForReady(b, "./testdata/bareready")
	measureReady(b, func(addr string) *exec.Cmd { return exec.Command(bin, addr) })
}

func buildForReady(b *testing.B, pkg string) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "server")
	build := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", bin, pkg)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		b.Fatalf("go build: %v", err)
	}
	return bin
}

// measureReady starts the command start gives for a free address b.N
// times and reports the median and 99th percentile from exec to the first
// 200 of /healthz.
func measureReady(b *testing.B, start func(addr string) *exec.Cmd) {
	client := &http.Client{Timeout: time.Second}
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		began := time.Now()
		cmd := start(addr)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		for {
			res, err := client.Get("http://" + addr + "/healthz")
			if err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Since(began) > 10*time.Second {
				_ = cmd.Process.Kill()
				b.Fatal("not ready after 10 s")
			}
			time.Sleep(500 * time.Microsecond)
		}
		took = append(took, time.Since(began))
		b.StopTimer()
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		b.StartTimer()
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	pct := func(p float64) float64 {
		return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
