package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"appkb/db"
	"appkb/handlers"
	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
	"appkb/internal/run/sandbox"
)

// workflowServer is the real HTTP handler over a fresh database holding
// the 20-node app of testdata/workflow20.yml, and a key for it.
type workflowServer struct {
	e   *echo.Echo
	key string
}

func newWorkflowServer(b *testing.B) *workflowServer {
	return newAppServer(b, "testdata/workflow20.yml", nil)
}

// newAppServer is the real router over a fresh database holding the app
// of the DSL file def, with a key for it; py, when not nil, runs python3
// code nodes.
func newAppServer(b *testing.B, def string, py *sandbox.Python) *workflowServer {
	b.Helper()
	ctx := context.Background()
	gdb, err := db.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close(gdb) })
	checkpointInBackground(b, gdb)
	text, err := os.ReadFile(def)
	if err != nil {
		b.Fatal(err)
	}
	app, err := apps.NewStore(gdb).Import(ctx, text)
	if err != nil {
		b.Fatal(err)
	}
	key, err := apikeys.NewStore(gdb).CreateAppKey(ctx, app.ID, "")
	if err != nil {
		b.Fatal(err)
	}
	deps := handlers.Deps{DB: gdb}
	if py != nil {
		deps.Python = py
	}
	return &workflowServer{e: routerWith(b, deps), key: key}
}

// run sends one POST /v1/workflows/run and returns the body; anything but
// a 200 fails the benchmark.
func (s *workflowServer) run(b *testing.B, n int64, mode string) []byte {
	body := fmt.Sprintf(`{"inputs":{"topic":"fast delivery of %d small parcels to Lisbon"},"user":"bench-%d","response_mode":%q}`, n, n%64, mode)
	req := httptest.NewRequest(http.MethodPost, "/v1/workflows/run", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// steps runs the workflow once in blocking mode, checks that it
// succeeded and returns how many node executions a run takes.
func (s *workflowServer) steps(b *testing.B) int {
	var res struct {
		Data struct {
			Status     string `json:"status"`
			Error      any    `json:"error"`
			TotalSteps int    `json:"total_steps"`
		} `json:"data"`
	}
	if err := json.Unmarshal(s.run(b, 0, "blocking"), &res); err != nil {
		b.Fatal(err)
	}
	if res.Data.Status != "succeeded" || res.Data.TotalSteps == 0 {
		b.Fatalf("warm-up run: status %q, error %v, %d steps", res.Data.Status, res.Data.Error, res.Data.TotalSteps)
	}
	return res.Data.TotalSteps
}

// BenchmarkWorkflow20 runs the 20-node workflow of testdata/workflow20.yml
// end to end through the router, one run at a time, in blocking and in
// streaming mode (the whole stream is read). ns/node divides the time of
// a run by its node executions (total_steps, 22 for this graph), so it
// includes HTTP, validation, storage of the run and of every node
// execution, and the builtin model's calls.
func BenchmarkWorkflow20(b *testing.B) {
	for _, mode := range []string{"blocking", "streaming"} {
		b.Run(mode, func(b *testing.B) {
			s := newWorkflowServer(b)
			steps := s.steps(b)
			var n int64
			var l latencies
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				n++
				start := time.Now()
				body := s.run(b, n, mode)
				l.add(time.Since(start))
				if mode == "streaming" && !strings.Contains(string(body), `"event":"workflow_finished"`) {
					b.Fatalf("stream without workflow_finished: %s", body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(steps), "ns/node")
			b.ReportMetric(float64(steps), "nodes/op")
			l.report(b)
		})
	}
}

// BenchmarkWorkflow20Parallel runs the same workflow in blocking mode from
// 16 goroutines at once (as many connections as the load tool's main
// phase): what a server does when many runs are in flight, where each
// run's rows compete for the one SQLite writer.
func BenchmarkWorkflow20Parallel(b *testing.B) {
	s := newWorkflowServer(b)
	steps := s.steps(b)
	runs := s.runParallel(b)
	b.ReportMetric(runs*float64(steps), "nodes/s")
}

// runParallel runs the server's workflow in blocking mode from 16
// goroutines for the benchmark's iterations, reports runs/s, the
// process's CPU time per run and the latency percentiles, and returns the
// runs per second.
func (s *workflowServer) runParallel(b *testing.B) float64 {
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	var n atomic.Int64
	var l latencies
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cpuClock()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t := time.Now()
			s.run(b, n.Add(1), "blocking")
			l.add(time.Since(t))
		}
	})
	runs := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(runs, "runs/s")
	reportCPU(b, cpu, "run")
	l.report(b)
	return runs
}

// BenchmarkPythonWorkflow runs a three-node workflow whose code node runs
// python3 in the bubblewrap sandbox, one run at a time through the router:
// with a sandbox started for each run, and with the pool keeping two
// started ahead (as serve does). With a pause of 100 ms between runs (the
// timer stops during it), as when requests arrive now and then, a run finds
// a sandbox ready; back to back, runs come as fast as they finish and may
// find the pool still refilling.
func BenchmarkPythonWorkflow(b *testing.B) {
	for _, tc := range []struct {
		name  string
		warm  int
		pause time.Duration
	}{
		{"started-for-each-run", -1, 100 * time.Millisecond},
		{"started-ahead", sandbox.DefaultWarm, 100 * time.Millisecond},
		{"started-for-each-run/back-to-back", -1, 0},
		{"started-ahead/back-to-back", sandbox.DefaultWarm, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			py, err := sandbox.NewPython(sandbox.Config{Warm: tc.warm})
			if err != nil {
				b.Fatal(err)
			}
			py.Start(context.Background())
			b.Cleanup(py.Stop)
			s := newAppServer(b, "testdata/python.yml", py)
			s.steps(b)
			var l latencies
			var n int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if tc.pause > 0 {
					b.StopTimer()
					time.Sleep(tc.pause)
					b.StartTimer()
				}
				n++
				start := time.Now()
				s.run(b, n, "blocking")
				l.add(time.Since(start))
			}
			l.report(b)
		})
	}
}
