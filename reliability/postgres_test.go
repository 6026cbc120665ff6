//go:build reliability

package reliability

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// pgCluster is a throwaway PostgreSQL server in a temp directory.
type pgCluster struct {
	bin, data, port string
	as              []string // runs a command as the cluster's owner
}

func (c *pgCluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(c.as[0], append(append(c.as[1:], filepath.Join(c.bin, name)), args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func (c *pgCluster) ctl(t *testing.T, verb string) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data, "-l", c.data+".log", "-w", "-t", "60", "-m", "fast",
		"-o", "-p "+c.port+" -k "+filepath.Dir(c.data)+" -c listen_addresses=127.0.0.1 -c fsync=off", verb)
}

// startPostgres starts a cluster when the machine has PostgreSQL's
// programs, and skips the test otherwise. initdb refuses root, so as root
// the cluster belongs to nobody.
func startPostgres(t *testing.T) *pgCluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("no PostgreSQL programs under /usr/lib/postgresql")
	}
	sort.Strings(bins)
	dir, err := os.MkdirTemp("", "appkb-pg-restart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &pgCluster{bin: filepath.Dir(bins[len(bins)-1]), data: filepath.Join(dir, "data"), as: []string{"env"}}
	if os.Geteuid() == 0 {
		if err := exec.Command("chown", "nobody", dir).Run(); err != nil {
			t.Fatal(err)
		}
		c.as = []string{"runuser", "-u", "nobody", "--"}
	}
	c.port = strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	c.run(t, "initdb", "-D", c.data, "--auth=trust", "--username=appkb", "--encoding=UTF8", "--no-sync")
	c.ctl(t, "start")
	t.Cleanup(func() {
		exec.Command(c.as[0], append(append(c.as[1:], filepath.Join(c.bin, "pg_ctl")), "-D", c.data, "-m", "immediate", "stop")...).Run()
	})
	return c
}

// While the PostgreSQL server restarts, requests that need it are answered
// 503 service_unavailable with Retry-After (or wait and succeed), never
// 500, and the server serves again at once when the database is back.
func TestPostgresRestart(t *testing.T) {
	pg := startPostgres(t)
	url := fmt.Sprintf("postgres://appkb@127.0.0.1:%s/postgres?sslmode=disable", pg.port)
	s := start(t, t.TempDir(), "--database-url", url)
	key := s.keys["chat"]

	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		noRetry  int // 503s without Retry-After
		errs     int
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	body := `{"query": "hi", "inputs": {}, "user": "u1", "response_mode": "blocking"}`
	client := &http.Client{Timeout: 30 * time.Second}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", s.base+"/chat-messages", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				mu.Lock()
				if err != nil {
					errs++
				} else {
					statuses[res.StatusCode]++
					if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") == "" {
						noRetry++
					}
					res.Body.Close()
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)
	restart := time.Now()
	pg.ctl(t, "restart")
	restarted := time.Since(restart)
	// The server answers again soon after the database is back.
	var back time.Duration
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, err := s.call("POST", "/chat-messages", key, map[string]any{"query": "hi", "inputs": map[string]any{}, "user": "u2"}, nil); err == nil && code == 200 {
			back = time.Since(restart)
			break
		}
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("restart took %s; answers %v, transport errors %d, serving again %s after the restart began",
		restarted.Round(time.Millisecond), statuses, errs, back.Round(time.Millisecond))
	if back == 0 {
		t.Fatalf("no chat succeeded within 20 s of the restart; log:\n%s", s.log)
	}
	if statuses[http.StatusInternalServerError] > 0 || noRetry > 0 || errs > 0 {
		var bad []string
		for _, line := range strings.Split(s.log.String(), "\n") {
			if strings.Contains(line, "status=500") || strings.Contains(line, "level=ERROR") {
				bad = append(bad, line)
			}
		}
		if len(bad) > 8 {
			bad = bad[:8]
		}
		t.Fatalf("%d answers 500, %d 503 without Retry-After, %d transport errors during the restart; log:\n%s",
			statuses[http.StatusInternalServerError], noRetry, errs, strings.Join(bad, "\n"))
	}
	for code := range statuses {
		if code != 200 && code != http.StatusServiceUnavailable && code != http.StatusTooManyRequests {
			t.Errorf("%d answers with status %d", statuses[code], code)
		}
	}
}
