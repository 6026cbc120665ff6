// Command load drives a running appkb server with concurrent chat messages
// and reports throughput, latency percentiles and errors. It is the load
// script of bench/README.md.
//
//	go run ./bench/load -key app-… -c 16 -d 10s                  # blocking
//	go run ./bench/load -key app-… -c 200 -d 20s -mode streaming # held streams
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:5001/v1", "API base URL")
	key := flag.String("key", os.Getenv("APPKB_KEY"), "app key of a chat app (or APPKB_KEY)")
	clients := flag.Int("c", 16, "concurrent clients")
	duration := flag.Duration("d", 10*time.Second, "how long to send")
	mode := flag.String("mode", "blocking", "response_mode: blocking or streaming")
	flag.Parse()
	if *key == "" {
		fmt.Fprintln(os.Stderr, "load: -key is required")
		os.Exit(2)
	}

	transport := &http.Transport{MaxIdleConnsPerHost: *clients, MaxConnsPerHost: 0}
	client := &http.Client{Transport: transport, Timeout: 5 * time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()

	var (
		mu      sync.Mutex
		lat     []time.Duration
		errs    atomic.Int64
		first   error
		seq     atomic.Int64
		wg      sync.WaitGroup
		started = time.Now()
	)
	for c := range *clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := seq.Add(1)
				body := fmt.Sprintf(`{"query":"load test question %d","inputs":{},"user":"load-%d","response_mode":%q}`, n, c, *mode)
				t := time.Now()
				err := send(client, *url, *key, body, *mode == "streaming")
				d := time.Since(t)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if errs.Add(1) == 1 {
						mu.Lock()
						first = err
						mu.Unlock()
					}
					continue
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(started)

	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(p*float64(len(lat)-1))]
	}
	fmt.Printf("mode %s, %d clients, %s\n", *mode, *clients, elapsed.Round(time.Millisecond))
	fmt.Printf("ok %d  errors %d  throughput %.0f msgs/s\n", len(lat), errs.Load(), float64(len(lat))/elapsed.Seconds())
	fmt.Printf("latency p50 %s  p90 %s  p99 %s  max %s\n", pct(0.5), pct(0.9), pct(0.99), pct(1))
	if first != nil {
		fmt.Printf("first error: %v\n", first)
		os.Exit(1)
	}
}

// send posts one chat message and reads the whole answer. A stream counts
// as successful when it holds exactly one message_end and no error event.
func send(client *http.Client, url, key, body string, streaming bool) error {
	req, err := http.NewRequest(http.MethodPost, url+"/chat-messages", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("status %d: %s", res.StatusCode, b)
	}
	if !streaming {
		_, err := io.Copy(io.Discard, res.Body)
		return err
	}
	ends := 0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, `data: {"event":"message_end"`):
			ends++
		case strings.HasPrefix(line, `data: {"event":"error"`):
			return fmt.Errorf("error event: %s", line)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if ends != 1 {
		return fmt.Errorf("stream ended with %d message_end events", ends)
	}
	return nil
}
