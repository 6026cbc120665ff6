//go:build reliability

package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"appkb/db"
)

// streamUntil posts a streaming request and reads events until pick
// returns true for one; the response stays open (the caller kills the
// server while it is).
func streamUntil(t *testing.T, s *server, path, key string, body any, pick func(map[string]any) bool) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.base+path, strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("%s: %d %s", path, res.StatusCode, b)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		payload, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if json.Unmarshal([]byte(payload), &ev) == nil && pick(ev) {
			return ev
		}
	}
	t.Fatalf("%s: stream ended before the awaited event", path)
	return nil
}

// SIGKILL while documents are being indexed: after a restart every
// acknowledged document is there and ends completed or error; none stays
// in progress.
func TestKillDuringIndexing(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	key := s.keys["knowledge"]
	var ds struct{ ID string }
	if code, err := s.call("POST", "/datasets", key, map[string]any{"name": "kb", "indexing_technique": "economy"}, &ds); err != nil || code != 200 {
		t.Fatalf("create dataset: %d %v", code, err)
	}
	text := strings.Repeat("Reliability is what keeps a server serving. ", 20_000)
	var acked []string
	for i := range 8 {
		var out struct {
			Document struct{ ID string } `json:"document"`
		}
		code, err := s.call("POST", "/datasets/"+ds.ID+"/document/create-by-text", key, map[string]any{
			"name": fmt.Sprintf("doc %d", i), "text": text, "indexing_technique": "economy",
			"process_rule": map[string]any{"mode": "automatic"}}, &out)
		if err != nil || code != 200 {
			t.Fatalf("create document: %d %v", code, err)
		}
		acked = append(acked, out.Document.ID)
	}
	s.kill()
	s = start(t, dir)
	key = s.keys["knowledge"] // demo keys are new at every start
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var list struct {
			Data []struct {
				ID             string `json:"id"`
				IndexingStatus string `json:"indexing_status"`
			} `json:"data"`
		}
		if _, err := s.call("GET", "/datasets/"+ds.ID+"/documents?limit=100", key, nil, &list); err != nil {
			t.Fatal(err)
		}
		found, done := 0, 0
		statuses := map[string]int{}
		for _, d := range list.Data {
			if slices.Contains(acked, d.ID) {
				found++
			}
			statuses[d.IndexingStatus]++
			if d.IndexingStatus == "completed" || d.IndexingStatus == "error" {
				done++
			}
		}
		if found != len(acked) {
			t.Fatalf("%d of %d acknowledged documents after the restart", found, len(acked))
		}
		if done == len(list.Data) {
			t.Logf("after SIGKILL and restart: %v", statuses)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("documents still in progress: %v", statuses)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// SIGKILL during a streamed chat: the message the stream announced is
// stored after the restart, and is not left half-written as a normal
// answer.
func TestKillDuringStreamedChat(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	key := s.keys["chat"]
	ev := streamUntil(t, s, "/chat-messages", key, map[string]any{
		"query": strings.Repeat("Tell me everything about reliability. ", 50), "inputs": map[string]any{},
		"user": "alice", "response_mode": "streaming"},
		func(ev map[string]any) bool { return ev["message_id"] != nil && ev["conversation_id"] != "" })
	s.kill()
	s = start(t, dir)
	key = s.keys["chat"]
	var msgs struct {
		Data []struct {
			ID     string  `json:"id"`
			Status string  `json:"status"`
			Error  *string `json:"error"`
			Answer string  `json:"answer"`
		} `json:"data"`
	}
	path := fmt.Sprintf("/messages?user=alice&conversation_id=%s", ev["conversation_id"])
	if code, err := s.call("GET", path, key, nil, &msgs); err != nil || code != 200 {
		t.Fatalf("messages: %d %v", code, err)
	}
	if len(msgs.Data) != 1 || msgs.Data[0].ID != ev["message_id"] {
		t.Fatalf("acknowledged message %v missing: %+v", ev["message_id"], msgs.Data)
	}
	m := msgs.Data[0]
	switch {
	case m.Status == "error" && m.Error != nil && strings.Contains(*m.Error, "interrupted"):
		t.Logf("cut-off answer closed as error: %q (%d bytes kept)", *m.Error, len(m.Answer))
	case m.Status == "normal" && m.Answer != "":
		t.Logf("the answer was complete before the kill")
	default:
		t.Fatalf("message after restart: status %q error %v answer %q", m.Status, m.Error, m.Answer)
	}
	// The server serves chats again.
	var out map[string]any
	if code, err := s.call("POST", "/chat-messages", key, map[string]any{"query": "hi", "inputs": map[string]any{}, "user": "alice"}, &out); err != nil || code != 200 {
		t.Fatalf("chat after restart: %d %v", code, err)
	}
}

const slowWorkflow = `app: {mode: workflow, name: Slow}
kind: app
version: 0.3.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: [{variable: q, label: q, type: text-input, required: false}]}
    - id: x
      data: {type: code, title: Slow, code_language: javascript, variables: [], outputs: {r: {type: string}},
        code: 'function main() { const t = Date.now(); while (Date.now() - t < 5000) {} return {r: "done"} }'}
    - id: end
      data: {type: end, title: End, outputs: [{variable: out, value_selector: [x, r]}]}
    edges:
    - {source: start, sourceHandle: source, target: x}
    - {source: x, sourceHandle: source, target: end}
`

// SIGKILL during a workflow run: after the restart the run is recorded and
// closed as failed, not left running.
func TestKillDuringWorkflowRun(t *testing.T) {
	dir := t.TempDir()
	key := importApp(t, dir, slowWorkflow)
	s := start(t, dir)
	ev := streamUntil(t, s, "/workflows/run", key, map[string]any{"inputs": map[string]any{}, "user": "bob", "response_mode": "streaming"},
		func(ev map[string]any) bool { return ev["event"] == "node_started" })
	runID, _ := ev["workflow_run_id"].(string)
	s.kill()
	s = start(t, dir)
	var run struct {
		Status string  `json:"status"`
		Error  *string `json:"error"`
	}
	if code, err := s.call("GET", "/workflows/run/"+runID, key, nil, &run); err != nil || code != 200 {
		t.Fatalf("run %s: %d %v", runID, code, err)
	}
	if run.Status == "running" || run.Status == "" {
		t.Fatalf("run left %q", run.Status)
	}
	t.Logf("interrupted run: %s (%v)", run.Status, deref(run.Error))
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Hundreds of idle and slow connections neither use up the server's file
// descriptors nor keep it from answering for long.
func TestConnectionExhaustion(t *testing.T) {
	dir := t.TempDir()
	const maxConns = 64
	// No python sandboxes started ahead: the pool fills in the background, and
	// its pipes and cgroup files would count against the connections here.
	s := start(t, dir, "--max-conns", fmt.Sprint(maxConns), "--header-timeout", "2s", "--idle-timeout", "2s", "--read-timeout", "3s", "--code-warm", "0")
	baseFDs := s.openFiles()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 300 { // idle: connect and say nothing
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for range 100 { // slow body: headers, a few bytes, then nothing
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/chat-messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"query\":", s.keys["chat"])
		conns = append(conns, c)
	}
	maxFDs := 0
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
				maxFDs = max(maxFDs, s.openFiles())
			}
		}
	}()
	began := time.Now()
	client := &http.Client{Timeout: 2 * time.Minute}
	req, _ := http.NewRequest("GET", s.base+"/info", nil)
	req.Header.Set("Authorization", "Bearer "+s.keys["chat"])
	res, err := client.Do(req)
	took := time.Since(began)
	close(done)
	if err != nil {
		t.Fatalf("GET /info with 400 hostile connections: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || !s.alive() {
		t.Fatalf("status %d, alive %v", res.StatusCode, s.alive())
	}
	if maxFDs > baseFDs+maxConns+16 {
		t.Fatalf("open files rose from %d to %d with --max-conns %d", baseFDs, maxFDs, maxConns)
	}
	t.Logf("400 idle/slow connections: GET /info answered in %s; open files %d → at most %d (--max-conns %d)", took.Round(time.Millisecond), baseFDs, maxFDs, maxConns)
}

// Hundreds of connections without a key that send a body slowly: each is
// answered 401 from its headers and closed, none holds an admission slot
// or its descriptor, and GET /info answers meanwhile.
func TestKeylessTricklers(t *testing.T) {
	dir := t.TempDir()
	const maxConns = 64
	s := start(t, dir, "--max-conns", fmt.Sprint(maxConns), "--max-inflight", "4", "--queue-wait", "100ms", "--auth-fail-limit", "0")
	baseFDs := s.openFiles()
	answered := 0
	for range 300 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/chat-messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{\"query\":")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && res.StatusCode == 401 {
			answered++
		}
		defer c.Close()
	}
	if answered != 300 {
		t.Fatalf("%d of 300 keyless uploads answered 401", answered)
	}
	req, _ := http.NewRequest("GET", s.base+"/info", nil)
	req.Header.Set("Authorization", "Bearer "+s.keys["chat"])
	began := time.Now()
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET /info beside 300 keyless uploads: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET /info: %d", res.StatusCode)
	}
	if fds := s.openFiles(); fds > baseFDs+maxConns+16 {
		t.Fatalf("open files rose from %d to %d", baseFDs, fds)
	}
	t.Logf("300 keyless slow uploads all got 401; GET /info answered in %s", time.Since(began).Round(time.Millisecond))
}

// 2,000 blocking chats at once: no 5xx other than 503, and every 200 is
// stored.
func TestOverload(t *testing.T) {
	for _, flags := range [][]string{nil, {"--max-inflight", "8", "--queue-wait", "200ms"}} {
		t.Run(strings.Join(append([]string{"defaults"}, flags...), " "), func(t *testing.T) { overload(t, flags) })
	}
}

func overload(t *testing.T, flags []string) {
	dir := t.TempDir()
	s := start(t, dir, flags...)
	key := s.keys["chat"]
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("OVERLOAD_N")); err == nil {
		n = v
	}
	transport := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}
	client := &http.Client{Transport: transport, Timeout: 5 * time.Minute}
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		ids      []string
		lat      []time.Duration
		wg       sync.WaitGroup
		gate     = make(chan struct{})
	)
	began := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			body := fmt.Sprintf(`{"query":"hello %d","inputs":{},"user":"user-%d","response_mode":"blocking"}`, i, i)
			req, _ := http.NewRequestWithContext(context.Background(), "POST", s.base+"/chat-messages", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			t0 := time.Now()
			res, err := client.Do(req)
			code := -1
			var out struct {
				MessageID string `json:"message_id"`
			}
			if err == nil {
				code = res.StatusCode
				if code == 503 && res.Header.Get("Retry-After") == "" {
					code = -503
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				json.Unmarshal(b, &out)
				if code != 200 && code != 503 {
					t.Logf("status %d: %s", code, b)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			statuses[code]++
			lat = append(lat, time.Since(t0))
			if code == 200 {
				ids = append(ids, out.MessageID)
			}
		}()
	}
	close(gate)
	wg.Wait()
	elapsed := time.Since(began)
	slices.Sort(lat)
	t.Logf("%d blocking chats at once in %s: statuses %v; latency p50 %s p95 %s max %s", n, elapsed.Round(time.Millisecond), statuses,
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*95/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	for code, c := range statuses {
		if code != 200 && code != 503 {
			t.Errorf("%d responses with status %d", c, code)
		}
	}
	s.stop()
	gdb, err := db.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(gdb)
	stored := 0
	for part := range slices.Chunk(ids, 500) {
		var c int64
		if err := gdb.Raw(`SELECT COUNT(*) FROM messages WHERE id IN ?`, part).Scan(&c).Error; err != nil {
			t.Fatal(err)
		}
		stored += int(c)
	}
	if stored != len(ids) {
		t.Fatalf("%d of %d answered messages stored", stored, len(ids))
	}
}

// Eight 60 MB uploads at once (over the 15 MB limit) do not grow the
// server's memory by more than 100 MB: parts go to disk as they arrive.
func TestUploadMemory(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	key := s.keys["chat"]
	before := s.rss("VmRSS")
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr, pw := io.Pipe()
			mw := multipart.NewWriter(pw)
			go func() {
				mw.WriteField("user", "u1")
				w, _ := mw.CreateFormFile("file", "big.txt")
				chunk := []byte(strings.Repeat("0123456789abcdef", 4096))
				for written := 0; written < 60<<20; written += len(chunk) {
					if _, err := w.Write(chunk); err != nil {
						pw.CloseWithError(err)
						return
					}
				}
				mw.Close()
				pw.Close()
			}()
			req, _ := http.NewRequest("POST", s.base+"/files/upload", pr)
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				codes[i] = -1
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			codes[i] = res.StatusCode
		}()
	}
	wg.Wait()
	peak := s.rss("VmHWM")
	growth := peak - before
	t.Logf("eight parallel 60 MB uploads: statuses %v; RSS %d MB before, peak %d MB (growth %d MB)", codes, before>>20, peak>>20, growth>>20)
	for _, c := range codes {
		if c != 413 {
			t.Errorf("status %d, want 413", c)
		}
	}
	if growth > 100<<20 {
		t.Fatalf("peak RSS grew by %d MB", growth>>20)
	}
}
