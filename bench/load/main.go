// Command load measures appkb's chat path against a fake model server.
//
// In one run it starts a fake OpenAI-compatible upstream on 127.0.0.1 (it
// answers every chat completion with 64 tokens at once, blocking or as a
// stream), starts `appkb serve --demo` with a providers file that sends the
// demo chat app's provider to that upstream, and then drives, phase by
// phase, first the upstream alone and then appkb with the same number of
// connections. It prints requests/s and latency percentiles per phase and
// the ratio appkb/upstream, so the cost appkb adds is read off directly.
//
//	go run ./bench/load -appkb bin/appkb            # what `make bench` runs
//	go run ./bench/load -appkb bin/appkb -streams 1000 -d 20s
//	go run ./bench/load -appkb bin/appkb -mode blocking -single=false -kb-docs 5000  # knowledge too
//	go run ./bench/load -appkb bin/appkb -relay    # also a bare relay: the HTTP work alone
//	go run ./bench/load -appkb bin/appkb -workflow # also workflow runs (workflow.yml)
//	go run ./bench/load -appkb bin/appkb -chatflow # also chatflow messages (chatflow.yml)
//	go run ./bench/load -url http://127.0.0.1:5001/v1 -key app-… -c 16   # a running server only
//
// It exits with status 1 when any request failed.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	appkbBin := flag.String("appkb", "", "appkb binary to start against the fake upstream (empty: use -url and -key)")
	url := flag.String("url", "http://127.0.0.1:5001/v1", "API base URL of a running server (without -appkb)")
	key := flag.String("key", os.Getenv("APPKB_KEY"), "app key of a chat app on a running server (or APPKB_KEY)")
	clients := flag.Int("c", 16, "concurrent connections of the main phases")
	duration := flag.Duration("d", 10*time.Second, "length of each phase")
	modes := flag.String("mode", "blocking,streaming", "response modes to measure, comma separated")
	single := flag.Bool("single", true, "also measure blocking at one connection (the latency appkb adds)")
	streams := flag.Int("streams", 0, "also hold this many concurrent streams for one phase (0: skip)")
	keep := flag.Bool("keep", false, "keep the temporary data directory")
	databaseURL := flag.String("database-url", "", "with -appkb: run the server on this (empty) PostgreSQL database instead of SQLite")
	relay := flag.Bool("relay", false, "with -appkb: also measure a bare relay that makes the same upstream calls as appkb and stores nothing (the cost of the HTTP work alone)")
	kbDocs := flag.Int("kb-docs", 0, "also upload this many short documents to a new knowledge base, time their indexing and measure retrieval (0: skip)")
	flow := flag.Bool("workflow", false, "with -appkb: also run the workflow of bench/load/workflow.yml (code, an llm node on the upstream, a template), blocking, with -c connections")
	chatflow := flag.Bool("chatflow", false, "with -appkb: also send messages to the chatflow of bench/load/chatflow.yml (an llm node with memory on the upstream, an answer), blocking, a new conversation each, with -c connections")
	flag.Parse()

	phases := chatPhases(*modes, *single, *clients, *streams)
	client := loadClient(max(*clients, *streams))

	var up *upstream
	relayBase, upBase, flowKey, chatflowKey := "", "", "", ""
	kbKey := os.Getenv("APPKB_KB_KEY")
	if *appkbBin != "" {
		var err error
		up, err = startUpstream()
		if err != nil {
			fail("fake upstream: %v", err)
		}
		defer up.srv.Close()
		if *relay {
			rl, err := startRelay(up.base)
			if err != nil {
				fail("relay: %v", err)
			}
			defer rl.srv.Close()
			relayBase = rl.base
		}
		srv, err := startAppkb(*appkbBin, up.base, *databaseURL, *keep, *flow, *chatflow)
		if err != nil {
			fail("appkb: %v", err)
		}
		defer srv.stop()
		*url, *key, kbKey, upBase = srv.base, srv.key, srv.kbKey, up.base
		flowKey, chatflowKey = srv.flowKey, srv.chatflowKey
	}
	if *key == "" {
		fail("give -appkb BIN, or -url and -key of a running server")
	}

	fmt.Printf("load: %s per phase, GOMAXPROCS of this tool %d; %s", *duration, numCPU(), loadavg())
	fmt.Printf("%-10s %-9s %6s %10s %9s %9s %9s %7s\n", "target", "mode", "conns", "req/s", "p50", "p99", "max", "errors")
	failed := false
	for _, ph := range phases {
		if !runChatPhase(client, ph, *duration, upBase, relayBase, *url, *key) {
			failed = true
		}
	}
	if flowKey != "" {
		// One run makes one blocking model call: the upstream's blocking
		// figures at the same connections are its floor.
		if !runFloorPhase(client, phase{mode: "blocking", conns: *clients}, *duration, upBase, "workflow", workflowRequest(*url, flowKey)) {
			failed = true
		}
	}
	if chatflowKey != "" {
		// A message makes one model call, from an llm node, which always
		// asks the upstream for a stream (as Dify's does): the upstream's
		// streaming figures at the same connections are its floor.
		if !runFloorPhase(client, phase{mode: "streaming", conns: *clients}, *duration, upBase, "chatflow", appkbRequest(*url, chatflowKey, "blocking")) {
			failed = true
		}
	}
	if *kbDocs > 0 {
		if kbKey == "" {
			fail("-kb-docs needs a knowledge key (appkb started by the tool, or APPKB_KB_KEY)")
		}
		if err := knowledgePhases(client, *url, kbKey, *kbDocs, *clients, *duration); err != nil {
			fmt.Println("knowledge:", err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// chatPhases lists the chat phases the flags ask for: per response mode
// one at conns connections (and blocking at one connection first when
// single), then one of streams concurrent streams when streams > 0.
func chatPhases(modes string, single bool, conns, streams int) []phase {
	var phases []phase
	for _, m := range strings.Split(modes, ",") {
		m = strings.TrimSpace(m)
		if m != "blocking" && m != "streaming" {
			fail("unknown mode %q", m)
		}
		if m == "blocking" && single {
			phases = append(phases, phase{mode: m, conns: 1})
		}
		phases = append(phases, phase{mode: m, conns: conns})
	}
	if streams > 0 {
		phases = append(phases, phase{mode: "streaming", conns: streams})
	}
	return phases
}

// loadClient is the HTTP client of every phase, keeping enough idle
// connections for maxConns concurrent ones.
func loadClient(maxConns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        maxConns * 2,
		MaxIdleConnsPerHost: maxConns * 2,
		IdleConnTimeout:     time.Minute,
	}}
}

// runChatPhase measures one chat phase: the upstream alone (when
// upstreamBase is set), the bare relay (when relayBase is set), then appkb
// at url, printing each and appkb's ratio to the upstream. It reports
// whether every request succeeded.
func runChatPhase(client *http.Client, ph phase, d time.Duration, upstreamBase, relayBase, url, key string) bool {
	ok := true
	var upRes *result
	if upstreamBase != "" {
		r := run(client, ph, d, upstreamRequest(upstreamBase, ph.mode))
		upRes = &r
		r.print("upstream", ph)
		ok = ok && r.errs == 0
	}
	if relayBase != "" {
		r := run(client, ph, d, appkbRequest(relayBase, "relay", ph.mode))
		r.print("relay", ph)
		ok = ok && r.errs == 0
		r.printRatio(ph, upRes)
	}
	r := run(client, ph, d, appkbRequest(url, key, ph.mode))
	r.print("appkb", ph)
	r.printRatio(ph, upRes)
	return ok && r.errs == 0
}

// runFloorPhase measures the upstream alone in ph's response mode, as the
// floor, then appkb's requests do under the label mode at the same
// connections, and prints their ratio. It reports whether every request of
// both succeeded.
func runFloorPhase(client *http.Client, ph phase, d time.Duration, upBase, mode string, do request) bool {
	up := run(client, ph, d, upstreamRequest(upBase, ph.mode))
	up.print("upstream", ph)
	ph.mode = mode
	r := run(client, ph, d, do)
	r.print("appkb", ph)
	r.printRatio(ph, &up)
	return r.errs == 0 && up.errs == 0
}

// knowledgePhases creates a high_quality knowledge base, uploads docs
// short documents through the API from conns connections, reports how long
// after the last upload every document was indexed, then measures
// POST /datasets/{id}/retrieve with each search method.
func knowledgePhases(client *http.Client, base, key string, docs, conns int, d time.Duration) error {
	call := func(method, path string, body any, out any) error {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, base+path, rd)
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
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("%s %s: status %d: %.300s", method, path, res.StatusCode, b)
		}
		if out != nil {
			return json.Unmarshal(b, out)
		}
		return nil
	}
	var ds struct{ ID string }
	if err := call(http.MethodPost, "/datasets", map[string]any{"name": "load", "indexing_technique": "high_quality",
		// The builtin embeddings: the providers file sends "appkb" to the
		// fake upstream, which serves chat only.
		"embedding_model_provider": "builtin", "embedding_model": "builtin"}, &ds); err != nil {
		return err
	}
	texts := knowledgeTexts(docs)
	var next atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(texts) {
					return
				}
				err := call(http.MethodPost, "/datasets/"+ds.ID+"/document/create-by-text", map[string]any{
					"name": fmt.Sprintf("doc%d", i), "text": texts[i], "indexing_technique": "high_quality",
					"process_rule": map[string]any{"mode": "automatic"}}, nil)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	uploaded := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	lastUpload := time.Now()
	for {
		var page struct{ Total int }
		if err := call(http.MethodGet, "/datasets/"+ds.ID+"/documents?status=available&limit=1", nil, &page); err != nil {
			return err
		}
		if page.Total >= docs {
			break
		}
		var failed struct{ Total int }
		if err := call(http.MethodGet, "/datasets/"+ds.ID+"/documents?status=error&limit=1", nil, &failed); err != nil {
			return err
		}
		if failed.Total > 0 {
			return fmt.Errorf("%d documents failed to index", failed.Total)
		}
		if time.Since(lastUpload) > 5*time.Minute {
			return fmt.Errorf("only %d of %d documents indexed after 5 minutes", page.Total, docs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("knowledge: %d documents uploaded in %s (%.0f/s) from %d connections; all indexed %s after the last upload\n",
		docs, uploaded.Round(time.Millisecond), float64(docs)/uploaded.Seconds(), conns, time.Since(lastUpload).Round(time.Millisecond))
	queries := []string{"honey bees and flowers", "volcanic ash clouds", "brewing green tea", "bicycle chain oil", "sleep and memory"}
	methods := []string{"full_text_search", "semantic_search", "hybrid_search"}
	retrieve := func(method string, n int64) error {
		return call(http.MethodPost, "/datasets/"+ds.ID+"/retrieve", map[string]any{
			"query": queries[n%int64(len(queries))],
			"retrieval_model": map[string]any{"search_method": method, "reranking_enable": false, "top_k": 4,
				"score_threshold_enabled": false}}, nil)
	}
	// The first searches of a new knowledge base start building its
	// in-memory indexes (vectors, full text), which takes seconds at tens
	// of thousands of chunks; they are sent, untimed, before the phases,
	// which measure a server that has been searching for a while.
	warm := time.Now()
	for n := int64(0); time.Since(warm) < kbWarmup; n++ {
		if err := retrieve(methods[n%int64(len(methods))], n); err != nil {
			return err
		}
	}
	fmt.Printf("knowledge: searched for %s before measuring (the indexes are built on first use)\n", kbWarmup)
	for _, method := range methods {
		ph := phase{mode: method, conns: 1}
		r := run(client, ph, d, func(ctx context.Context, client *http.Client, n int64) error {
			return retrieve(method, n)
		})
		r.print("retrieve", ph)
	}
	return nil
}

// kbWarmup is how long searches run before the knowledge phases.
const kbWarmup = 10 * time.Second

// knowledgeTexts makes short documents (two sentences) from a few topics.
func knowledgeTexts(n int) []string {
	topics := [][]string{
		{"honey", "bees", "hive", "queen", "flowers", "pollen", "dance", "colony"},
		{"volcanic", "ash", "magma", "eruption", "crust", "vent", "lava", "clouds"},
		{"green", "tea", "leaves", "brewing", "water", "steep", "oxidation", "cup"},
		{"bicycle", "chain", "oil", "tyre", "brakes", "wheel", "gear", "saddle"},
		{"sleep", "memory", "brain", "night", "hormone", "dream", "rest", "hours"},
	}
	out := make([]string, n)
	for i := range out {
		t := topics[i%len(topics)]
		var b strings.Builder
		for s := range 2 {
			for w := range 12 {
				if w > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(t[(i*7+s*3+w*5)%len(t)])
			}
			fmt.Fprintf(&b, " number %d. ", i)
		}
		out[i] = b.String()
	}
	return out
}

type phase struct {
	mode  string
	conns int
}

type result struct {
	ok, errs      int
	rps           float64
	p50, p99, max time.Duration
	first         error
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (r result) print(target string, ph phase) {
	fmt.Printf("%-10s %-9s %6d %10.0f %7.2fms %7.2fms %7.2fms %7d\n", target, ph.mode, ph.conns, r.rps, ms(r.p50), ms(r.p99), ms(r.max), r.errs)
	if r.first != nil {
		fmt.Printf("           first error: %v\n", r.first)
	}
}

// printRatio prints r against the upstream's own result, when there is one.
func (r result) printRatio(ph phase, up *result) {
	if up == nil || up.rps <= 0 {
		return
	}
	fmt.Printf("%-10s %-9s %6d %9.2fx %+8.2fms %+8.2fms\n", "ratio", ph.mode, ph.conns,
		r.rps/up.rps, ms(r.p50-up.p50), ms(r.p99-up.p99))
}

// request makes one call and checks its answer.
type request func(ctx context.Context, client *http.Client, n int64) error

// run sends requests from ph.conns loops for d and collects latencies.
func run(client *http.Client, ph phase, d time.Duration, do request) result {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu    sync.Mutex
		all   []time.Duration
		errs  int
		first error
		seq   atomic.Int64
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range ph.conns {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1024)
			var nerr int
			var ferr error
			for ctx.Err() == nil {
				t := time.Now()
				// Requests are not tied to ctx: one that started finishes,
				// so the end of a phase does not count as errors.
				err := do(context.Background(), client, seq.Add(1))
				if err != nil {
					nerr++
					if ferr == nil {
						ferr = err
					}
					continue
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			all = append(all, lat...)
			errs += nerr
			if first == nil {
				first = ferr
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[int(p*float64(len(all)-1))]
	}
	client.CloseIdleConnections()
	return result{ok: len(all), errs: errs, rps: float64(len(all)) / elapsed.Seconds(),
		p50: pct(0.5), p99: pct(0.99), max: pct(1), first: first}
}

// post sends a JSON body, with key as the bearer token when it is not
// empty.
func post(ctx context.Context, client *http.Client, url, key, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	return client.Do(req)
}

// appkbRequest sends chat messages to the chat app or chatflow of key (the
// demo chat app unless a phase says otherwise). Every client is its own
// end user and every message starts a new conversation. A stream succeeds
// when it holds exactly one message_end and no error event.
func appkbRequest(base, key, mode string) request {
	streaming := mode == "streaming"
	return func(ctx context.Context, client *http.Client, n int64) error {
		body := fmt.Sprintf(`{"query":"load test question %d","inputs":{},"user":"load-%d","response_mode":%q}`, n, n%64, mode)
		res, err := post(ctx, client, base+"/chat-messages", key, body)
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
		return checkStream(res.Body, `data: {"event":"message_end"`, `data: {"event":"error"`)
	}
}

// upstreamRequest calls the fake upstream directly with what appkb would
// send it, to measure the floor.
func upstreamRequest(base, mode string) request {
	streaming := mode == "streaming"
	return func(ctx context.Context, client *http.Client, n int64) error {
		body := fmt.Sprintf(`{"model":"builtin","messages":[{"role":"user","content":"load test question %d"}],"stream":%t}`, n, streaming)
		res, err := post(ctx, client, base+"/chat/completions", "", body)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		if !streaming {
			_, err := io.Copy(io.Discard, res.Body)
			return err
		}
		return checkStream(res.Body, "data: [DONE]", "")
	}
}

// workflowRequest runs the imported workflow, blocking; a run succeeds
// when the answer says succeeded.
func workflowRequest(base, key string) request {
	return func(ctx context.Context, client *http.Client, n int64) error {
		body := fmt.Sprintf(`{"inputs":{"topic":"parcels for Lisbon, batch %d"},"user":"load-%d","response_mode":"blocking"}`, n, n%64)
		res, err := post(ctx, client, base+"/workflows/run", key, body)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return err
		}
		var out struct {
			Data struct {
				Status string `json:"status"`
				Error  any    `json:"error"`
			} `json:"data"`
		}
		if res.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.Data.Status != "succeeded" {
			return fmt.Errorf("status %d: %.512s", res.StatusCode, b)
		}
		return nil
	}
}

func checkStream(r io.Reader, end, bad string) error {
	ends := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, end):
			ends++
		case bad != "" && strings.HasPrefix(line, bad):
			return fmt.Errorf("error event: %s", line)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if ends != 1 {
		return fmt.Errorf("stream ended with %d end events", ends)
	}
	return nil
}

// --- the fake upstream ---

func numCPU() int { return runtime.GOMAXPROCS(0) }

// loadavg returns the machine's load averages, as uptime shows them.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown\n"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load average unknown\n"
	}
	return fmt.Sprintf("load average %s %s %s\n", f[0], f[1], f[2])
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "load: "+format+"\n", args...)
	os.Exit(2)
}
