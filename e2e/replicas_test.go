// Package e2e runs appkb as separate processes, the way operators do, and
// checks what only shows across processes: several replicas on one
// PostgreSQL database behaving as one server.
package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"appkb/db"
)

// bin is the appkb binary the tests run, built once by TestMain when a
// PostgreSQL server is configured.
var bin string

func TestMain(m *testing.M) {
	if os.Getenv(db.TestDatabaseURLEnv) == "" {
		// Every test skips through db.TempURL, saying how to run them.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "appkb-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "appkb")
	build := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", bin, "appkb")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build appkb:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// replica is one `appkb serve` process with a data directory of its own.
type replica struct {
	name string
	base string // http://127.0.0.1:port/v1
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

// cluster is a database and the settings every replica shares.
type cluster struct {
	url       string
	providers string
}

func newCluster(t *testing.T, upstream string) *cluster {
	t.Helper()
	url := db.TempURL(t)
	providers := filepath.Join(t.TempDir(), "providers.yaml")
	// Apps naming provider "slow" talk to the test's model server; the
	// rest (embeddings) use the builtin model.
	conf := fmt.Sprintf("providers:\n  - name: slow\n    base_url: %s/v1\n    max_retries: 0\n    defaults: {chat: slow-1}\n", upstream)
	if err := os.WriteFile(providers, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return &cluster{url: url, providers: providers}
}

// start runs a replica and waits until it is ready.
func (c *cluster) start(t *testing.T, name string) *replica {
	t.Helper()
	r := &replica{name: name, done: make(chan struct{})}
	r.cmd = exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--database-url", c.url, "--providers", c.providers, "--log-format", "json")
	r.cmd.Env = append(os.Environ(), "APPKB_DATABASE_URL=", "APPKB_DATA_DIR=")
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.logs.WriteString(line + "\n")
			r.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "appkb listening" {
				addr <- rec.Addr
			}
		}
		r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			r.mu.Lock()
			t.Logf("log of replica %s:\n%s", r.name, r.logs.String())
			r.mu.Unlock()
		}
	})
	select {
	case a := <-addr:
		r.base = "http://" + a + "/v1"
	case <-r.done:
		t.Fatalf("replica %s exited before listening", name)
	case <-time.After(60 * time.Second):
		t.Fatalf("replica %s did not start", name)
	}
	waitFor(t, 30*time.Second, "replica "+name+" ready", func() bool {
		resp, err := http.Get(strings.TrimSuffix(r.base, "/v1") + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return r
}

// stop asks the replica to shut down and waits for it.
func (r *replica) stop() {
	select {
	case <-r.done:
		return
	default:
	}
	r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}

// kill ends the replica at once, as a crash or a lost machine would.
func (r *replica) kill() {
	r.cmd.Process.Kill()
	<-r.done
}

// cli runs an appkb command against the cluster's database and decodes
// its one-line JSON answer into out (when out is not nil).
func (c *cluster) cli(t *testing.T, out any, args ...string) {
	t.Helper()
	full := append([]string{args[0], args[1], "--database-url", c.url, "--data-dir", t.TempDir()}, args[2:]...)
	cmd := exec.Command(bin, full...)
	cmd.Env = append(os.Environ(), "APPKB_DATABASE_URL=", "APPKB_DATA_DIR=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("appkb %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if out != nil {
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			t.Fatalf("appkb %s printed %q: %v", strings.Join(args, " "), stdout.String(), err)
		}
	}
}

// importApp imports a definition and returns an app key for it.
func (c *cluster) importApp(t *testing.T, yaml string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "app.yml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	var got struct {
		AppID  string `json:"app_id"`
		APIKey string `json:"api_key"`
	}
	c.cli(t, &got, "app", "import", f)
	if got.APIKey == "" {
		t.Fatal("app import printed no key")
	}
	return got.APIKey
}

// call sends a JSON request and returns the status and body.
func (r *replica) call(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	resp := r.open(t, method, path, key, body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, r.name, err)
	}
	return resp.StatusCode, b
}

// open sends a request and returns the response with its body unread.
func (r *replica) open(t *testing.T, method, path, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, r.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, r.name, err)
	}
	return resp
}

// mustJSON sends a request that must answer want and decodes the body.
func (r *replica) mustJSON(t *testing.T, want int, method, path, key, body string) map[string]any {
	t.Helper()
	code, b := r.call(t, method, path, key, body)
	if code != want {
		t.Fatalf("%s %s on %s: %d %s, want %d", method, path, r.name, code, b, want)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s on %s: %v in %s", method, path, r.name, err, b)
	}
	return out
}

// frames reads the SSE data frames of a stream, handing each decoded
// frame to fn until fn returns false or the stream ends.
func frames(t *testing.T, body io.Reader, fn func(map[string]any) bool) {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var f map[string]any
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("bad frame %q: %v", line, err)
		}
		if !fn(f) {
			return
		}
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// slowModel is an OpenAI-compatible model server. A streamed answer is
// "tick" sent ticks times, one every tickEvery, so a stream can be
// stopped or followed while it runs; a blocking answer is "pong".
type slowModel struct {
	ticks     int
	tickEvery time.Duration
}

func (m slowModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	var req struct{ Stream bool }
	json.NewDecoder(r.Body).Decode(&req)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"slow-1","choices":[{"index":0,"message":{"role":"assistant","content":"pong"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	chunk := func(delta, finish string) {
		fin := "null"
		if finish != "" {
			fin = strconv.Quote(finish)
		}
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"slow-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":%s}]}\n\n", strconv.Quote(delta), fin)
		fl.Flush()
	}
	for i := 0; i < m.ticks; i++ {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(m.tickEvery):
		}
		chunk("tick ", "")
	}
	chunk("", "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

const chatApp = `app: {mode: chat, name: Replicated chat}
kind: app
version: 0.1.5
model_config:
  model: {provider: slow, name: slow-1, mode: chat, completion_params: {}}
  pre_prompt: You are terse.
`

const flowApp = `app: {mode: workflow, name: Replicated flow}
kind: app
version: 0.6.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: ask
      data: {type: llm, title: Ask, model: {provider: slow, name: slow-1, mode: chat}, prompt_template: [{role: user, text: 'Go'}]}
    - id: end
      data: {type: end, title: End, outputs: [{variable: text, value_selector: [ask, text]}]}
    edges:
    - {source: start, sourceHandle: source, target: ask}
    - {source: ask, sourceHandle: source, target: end}
`

// approvalApp pauses on a review form; approving ends with the action.
const approvalApp = `app: {mode: workflow, name: Replicated approval}
kind: app
version: 0.6.0
workflow:
  graph:
    nodes:
    - id: start
      data: {type: start, title: Start, variables: []}
    - id: review
      data:
        type: human-input
        title: Review
        delivery_methods: [{type: webapp, enabled: true}]
        form_content: "Approve?"
        inputs: []
        user_actions:
        - {id: approve, title: Approve, button_style: primary}
    - id: end
      data: {type: end, title: End, outputs: [{variable: verdict, value_selector: [review, __action_id]}]}
    edges:
    - {source: start, sourceHandle: source, target: review}
    - {source: review, sourceHandle: approve, target: end}
`

// TestReplicasShareOneDatabase runs two replicas with separate data
// directories on one PostgreSQL database and uses them as one server.
func TestReplicasShareOneDatabase(t *testing.T) {
	upstream := httptest.NewServer(slowModel{ticks: 100, tickEvery: 50 * time.Millisecond})
	defer upstream.Close()
	c := newCluster(t, upstream.URL)
	chatKey := c.importApp(t, chatApp)
	flowKey := c.importApp(t, flowApp)
	approvalKey := c.importApp(t, approvalApp)
	a := c.start(t, "A")
	b := c.start(t, "B")

	t.Run("a conversation started on A continues on B", func(t *testing.T) {
		first := a.mustJSON(t, 200, "POST", "/chat-messages", chatKey, `{"query":"ping","inputs":{},"user":"u1","response_mode":"blocking"}`)
		conv, _ := first["conversation_id"].(string)
		if conv == "" {
			t.Fatalf("no conversation id in %v", first)
		}
		b.mustJSON(t, 200, "POST", "/chat-messages", chatKey,
			`{"query":"again","inputs":{},"user":"u1","response_mode":"blocking","conversation_id":"`+conv+`"}`)
		hist := b.mustJSON(t, 200, "GET", "/messages?user=u1&conversation_id="+conv, chatKey, "")
		if msgs, _ := hist["data"].([]any); len(msgs) != 2 {
			t.Fatalf("B lists %d messages in the conversation, want 2: %v", len(msgs), hist)
		}
	})

	t.Run("a stream on A is stopped through B", func(t *testing.T) {
		resp := a.open(t, "POST", "/chat-messages", chatKey, `{"query":"long","inputs":{},"user":"u2","response_mode":"streaming"}`)
		defer resp.Body.Close()
		start := time.Now()
		stopped := false
		var last string
		frames(t, resp.Body, func(f map[string]any) bool {
			last, _ = f["event"].(string)
			if task, _ := f["task_id"].(string); task != "" && !stopped {
				stopped = true
				b.mustJSON(t, 200, "POST", "/chat-messages/"+task+"/stop", chatKey, `{"user":"u2"}`)
			}
			return true
		})
		// The full answer takes 5 s; stopped, the stream ends long before.
		if !stopped || time.Since(start) > 3*time.Second {
			t.Fatalf("stream ran %s (stop sent: %v, last event %q)", time.Since(start), stopped, last)
		}
	})

	t.Run("a workflow run on A is followed from B", func(t *testing.T) {
		resp := a.open(t, "POST", "/workflows/run", flowKey, `{"inputs":{},"user":"u3","response_mode":"streaming"}`)
		defer resp.Body.Close()
		runID := ""
		frames(t, resp.Body, func(f map[string]any) bool {
			runID, _ = f["workflow_run_id"].(string)
			return runID == ""
		})
		if runID == "" {
			t.Fatal("no workflow_run_id in the stream")
		}
		follow := b.open(t, "GET", "/workflow/"+runID+"/events?user=u3", flowKey, "")
		defer follow.Body.Close()
		if follow.StatusCode != 200 {
			body, _ := io.ReadAll(follow.Body)
			t.Fatalf("follow on B: %d %s", follow.StatusCode, body)
		}
		var events []string
		text := 0
		frames(t, follow.Body, func(f map[string]any) bool {
			ev, _ := f["event"].(string)
			if ev == "text_chunk" {
				text++
			} else if ev != "ping" {
				events = append(events, ev)
			}
			return ev != "workflow_finished"
		})
		if len(events) == 0 || events[len(events)-1] != "workflow_finished" || text == 0 {
			t.Fatalf("B saw %v and %d text chunks", events, text)
		}
		run := b.mustJSON(t, 200, "GET", "/workflows/run/"+runID, flowKey, "")
		if run["status"] != "succeeded" {
			t.Fatalf("run %v", run)
		}
	})

	t.Run("a run paused on A is resumed through B once", func(t *testing.T) {
		resp := a.open(t, "POST", "/workflows/run", approvalKey, `{"inputs":{},"user":"u4","response_mode":"streaming"}`)
		token, runID := "", ""
		frames(t, resp.Body, func(f map[string]any) bool {
			if f["event"] == "human_input_required" {
				runID, _ = f["workflow_run_id"].(string)
				if d, ok := f["data"].(map[string]any); ok {
					token, _ = d["form_token"].(string)
				}
			}
			return true
		})
		resp.Body.Close()
		if token == "" {
			t.Fatal("the run did not ask for input")
		}
		// Both replicas answer at once: one wins, the other is told the
		// form was answered.
		codes := make([]int, 2)
		var wg sync.WaitGroup
		for i, r := range []*replica{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _ = r.call(t, "POST", "/form/human_input/"+token, approvalKey, `{"inputs":{},"action":"approve","user":"u4"}`)
			}()
		}
		wg.Wait()
		if !(codes[0] == 200 && codes[1] == 412 || codes[0] == 412 && codes[1] == 200) {
			t.Fatalf("answers got %v, want one 200 and one 412", codes)
		}
		waitFor(t, 20*time.Second, "the resumed run to finish", func() bool {
			run := a.mustJSON(t, 200, "GET", "/workflows/run/"+runID, approvalKey, "")
			return run["status"] == "succeeded"
		})
		run := b.mustJSON(t, 200, "GET", "/workflows/run/"+runID, approvalKey, "")
		if out, _ := run["outputs"].(map[string]any); out["verdict"] != "approve" {
			t.Fatalf("run %v", run)
		}
	})

	t.Run("a key revoked on A is refused on B", func(t *testing.T) {
		key := c.importApp(t, chatApp)
		b.mustJSON(t, 200, "GET", "/info", key, "") // cached on B now
		c.cli(t, nil, "key", "revoke", key)
		start := time.Now()
		waitFor(t, 5*time.Second, "B to refuse the revoked key", func() bool {
			code, _ := b.call(t, "GET", "/info", key, "")
			return code == http.StatusUnauthorized
		})
		if d := time.Since(start); d > time.Second {
			t.Errorf("B went on accepting the revoked key for %s", d)
		}
	})

	var kbKey struct {
		APIKey string `json:"api_key"`
	}
	c.cli(t, &kbKey, "key", "create", "--knowledge")

	t.Run("documents uploaded across both replicas are indexed once each", func(t *testing.T) {
		ds := a.mustJSON(t, 200, "POST", "/datasets", kbKey.APIKey, `{"name":"shared","indexing_technique":"high_quality"}`)
		id, _ := ds["id"].(string)
		uploadMany(t, []*replica{a, b}, kbKey.APIKey, id, 200)
		waitIndexed(t, b, kbKey.APIKey, id, 200, 3*time.Minute)
		if got := indexedCount(t, a) + indexedCount(t, b); got != 200 {
			t.Fatalf("the replicas indexed %d documents between them, want exactly 200", got)
		}
	})

	t.Run("a replica killed while indexing leaves its work to the other", func(t *testing.T) {
		ds := a.mustJSON(t, 200, "POST", "/datasets", kbKey.APIKey, `{"name":"orphaned","indexing_technique":"high_quality"}`)
		id, _ := ds["id"].(string)
		uploadMany(t, []*replica{a}, kbKey.APIKey, id, 60)
		a.kill()
		waitIndexed(t, b, kbKey.APIKey, id, 60, 3*time.Minute)
	})
}

// uploadMany creates n text documents in dataset id, spread over the
// replicas in turn.
func uploadMany(t *testing.T, rs []*replica, key, id string, n int) {
	t.Helper()
	text := strings.Repeat("Penguins huddle together to keep warm through the polar winter. ", 40)
	for i := 0; i < n; i++ {
		r := rs[i%len(rs)]
		body := fmt.Sprintf(`{"name":"doc-%03d","text":%q,"indexing_technique":"high_quality","process_rule":{"mode":"automatic"}}`, i, text)
		r.mustJSON(t, 200, "POST", "/datasets/"+id+"/document/create-by-text", key, body)
	}
}

// waitIndexed waits until every one of the n documents of dataset id is
// completed, as r sees them.
func waitIndexed(t *testing.T, r *replica, key, id string, n int, limit time.Duration) {
	t.Helper()
	waitFor(t, limit, fmt.Sprintf("%d documents to be indexed", n), func() bool {
		done := 0
		for page := 1; ; page++ {
			list := r.mustJSON(t, 200, "GET", fmt.Sprintf("/datasets/%s/documents?page=%d&limit=100", id, page), key, "")
			docs, _ := list["data"].([]any)
			for _, d := range docs {
				m, _ := d.(map[string]any)
				if m["indexing_status"] == "error" {
					t.Fatalf("document failed: %v", m)
				}
				if m["indexing_status"] == "completed" {
					done++
				}
			}
			if more, _ := list["has_more"].(bool); !more {
				break
			}
		}
		return done == n
	})
}

var indexedMetric = regexp.MustCompile(`(?m)^appkb_indexing_documents_total\{outcome="completed"\} (\d+)`)

// indexedCount is how many documents r's workers have finished.
func indexedCount(t *testing.T, r *replica) int {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(r.base, "/v1") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := indexedMetric.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
