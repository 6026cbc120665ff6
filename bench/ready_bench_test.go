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
//	go test -tags sqlite_fts5 -run '^$' -bench EphemeralReady -benchtime 20x ./bench/
func BenchmarkEphemeralReady(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "appkb")
	build := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", bin, "..")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		b.Fatalf("go build: %v", err)
	}
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
		start := time.Now()
		cmd := exec.Command(bin, "serve", "--ephemeral", "--addr", addr, "--code-warm", "0")
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
			if time.Since(start) > 10*time.Second {
				_ = cmd.Process.Kill()
				b.Fatal("not ready after 10 s")
			}
			time.Sleep(500 * time.Microsecond)
		}
		took = append(took, time.Since(start))
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
