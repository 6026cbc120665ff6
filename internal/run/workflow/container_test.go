package workflow

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// iterGraph builds: start -> arr (code making an array from q) -> it
// (iteration over arr.items whose inner graph is s -> body) -> end.
func iterGraph(items, body, iterExtra string) string {
	itemsType, resultType := "array[string]", "string"
	if !strings.HasPrefix(items, "[") {
		itemsType = "string"
	}
	if strings.Contains(body, "[item") {
		resultType = "array[string]"
	}
	return graph(`
  - id: arr
    data: {type: code, title: Arr, code_language: javascript, code: 'function main() { return {items: `+items+`} }',
      variables: [], outputs: {items: {type: '`+itemsType+`'}}}
  - id: it
    data: {type: iteration, title: It, iterator_selector: [arr, items], output_selector: [body, result], start_node_id: its`+iterExtra+`}
  - id: its
    parentId: it
    type: custom-iteration-start
    data: {type: iteration-start, title: S, isInIteration: true}
  - id: body
    parentId: it
    data: {type: code, title: Body, code_language: javascript, isInIteration: true, iteration_id: it,
      code: '`+body+`',
      variables: [{variable: item, value_selector: [it, item]}, {variable: index, value_selector: [it, index]}], outputs: {result: {type: '`+resultType+`'}}}
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [it, output]}]}`,
		edge("start", "source", "arr"), edge("arr", "source", "it"), edge("its", "source", "body"), edge("it", "source", "end"))
}

func TestIteration(t *testing.T) {
	okBody := `function main({item, index}) { return {result: index + ":" + item} }`
	failB := `function main({item, index}) { if (item === "b") throw new Error("bad b"); return {result: item} }`
	listBody := `function main({item}) { return {result: [item, item]} }`
	tests := []struct {
		name, items, body, extra string
		wantStatus               string
		want                     string // Text of the output
		wantErr                  string
	}{
		{name: "collects each round's output", items: `["a","b","c"]`, body: okBody, wantStatus: RunSucceeded, want: `["0:a","1:b","2:c"]`},
		{name: "empty array", items: `[]`, body: okBody, wantStatus: RunSucceeded, want: `[]`},
		{name: "terminated stops the run", items: `["a","b","c"]`, body: failB, wantStatus: RunFailed, wantErr: "failed on item 1"},
		{name: "continue-on-error keeps a null", items: `["a","b","c"]`, body: failB, extra: ", error_handle_mode: continue-on-error", wantStatus: RunSucceeded, want: `["a",null,"c"]`},
		{name: "remove-abnormal-output drops it", items: `["a","b","c"]`, body: failB, extra: ", error_handle_mode: remove-abnormal-output", wantStatus: RunSucceeded, want: `["a","c"]`},
		{name: "array outputs are flattened", items: `["a","b"]`, body: listBody, wantStatus: RunSucceeded, want: `["a","a","b","b"]`},
		{name: "flatten_output false keeps nesting", items: `["a","b"]`, body: listBody, extra: ", flatten_output: false", wantStatus: RunSucceeded, want: `[["a","a"],["b","b"]]`},
		{name: "not an array", items: `"x"`, body: okBody, wantStatus: RunFailed, wantErr: "needs an array"},
	}
	// Every row runs in order and in parallel, with as many slots as items
	// and with fewer: the results must not differ.
	variants := []struct{ name, extra string }{
		{"in order", ""},
		{"parallel", ", is_parallel: true, parallel_nums: 3"},
		{"parallel with 2 slots", ", is_parallel: true, parallel_nums: 2"},
	}
	for _, tc := range tests {
		for _, v := range variants {
			t.Run(tc.name+"/"+v.name, func(t *testing.T) {
				src := iterGraph(tc.items, tc.body, tc.extra+v.extra)
				res, rec := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, src), Inputs: map[string]any{"q": "x"}})
				if res.Status != tc.wantStatus {
					t.Fatalf("status %s (%s), want %s", res.Status, res.Error, tc.wantStatus)
				}
				checkOrder(t, rec)
				if tc.wantErr != "" && !strings.Contains(res.Error, tc.wantErr) {
					t.Errorf("error %q, want %q", res.Error, tc.wantErr)
				}
				if tc.want != "" {
					if got := strings.ReplaceAll(Text(res.Outputs["out"]), " ", ""); got != tc.want {
						t.Errorf("output %s, want %s", got, tc.want)
					}
				}
			})
		}
	}
}

func TestIterationEvents(t *testing.T) {
	res, rec := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, iterGraph(`["a","b"]`, `function main({item}) { return {result: item} }`, "")), Inputs: map[string]any{"q": "x"}})
	if res.Status != RunSucceeded {
		t.Fatal(res.Error)
	}
	var seq []string
	for _, e := range rec.events {
		switch x := e.(type) {
		case *IterationStarted:
			seq = append(seq, "started")
		case *IterationNext:
			seq = append(seq, "next")
		case *IterationCompleted:
			seq = append(seq, "completed:"+x.Data.Status)
			if x.Data.Steps != 2 {
				t.Errorf("steps %d", x.Data.Steps)
			}
		case *NodeStarted:
			if x.Data.NodeID == "body" {
				if x.Data.IterationID == nil || *x.Data.IterationID != "it" {
					t.Errorf("inner node_started without iteration_id")
				}
				seq = append(seq, "body")
			}
		case *NodeFinished:
			if x.Data.NodeID == "body" && x.Data.ExecutionMetadata["iteration_id"] != "it" {
				t.Errorf("inner node_finished metadata %v", x.Data.ExecutionMetadata)
			}
		}
	}
	if got := strings.Join(seq, " "); got != "started next body body next body body completed:succeeded" && got != "started next body next body completed:succeeded" {
		t.Errorf("sequence %q", got)
	}
}

// TestLegacyIteration: old files have no iteration-start; start_node_id
// names the first inner node.
func TestLegacyIteration(t *testing.T) {
	src := iterGraph(`["a"]`, `function main({item}) { return {result: item + "!"} }`, "")
	src = strings.Replace(src, "start_node_id: its", "start_node_id: body, startNodeType: code", 1)
	res, _ := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, src), Inputs: map[string]any{"q": "x"}})
	if res.Status != RunSucceeded || Text(res.Outputs["out"]) != `["a!"]` {
		t.Fatalf("%s %s %v", res.Status, res.Error, res.Outputs)
	}
}

// loopGraph: a loop whose inner code node counts, and an assigner adding
// the count to a loop variable.
func loopGraph(extra string) string {
	return graph(`
  - id: lp
    data: {type: loop, title: Lp, start_node_id: ls, loop_count: 5, logical_operator: and`+extra+`,
      loop_variables: [{label: total, var_type: number, value_type: constant, value: 1}]}
  - id: ls
    parentId: lp
    type: custom-loop-start
    data: {type: loop-start, title: LS, isInLoop: true}
  - id: as
    parentId: lp
    data: {type: assigner, title: As, version: '2', isInLoop: true, loop_id: lp,
      items: [{variable_selector: [lp, total], input_type: constant, operation: '*=', value: 2}]}
  - id: end
    data: {type: end, title: End, outputs: [{variable: total, value_selector: [lp, total]}, {variable: rounds, value_selector: [lp, loop_round]}]}`,
		edge("start", "source", "lp"), edge("ls", "source", "as"), edge("lp", "source", "end"))
}

func TestLoop(t *testing.T) {
	tests := []struct {
		name, extra        string
		wantTotal, wantRnd float64
	}{
		{name: "runs loop_count rounds", wantTotal: 32, wantRnd: 5},
		{name: "break condition", extra: `, break_conditions: [{variable_selector: [lp, total], comparison_operator: '≥', value: '8'}]`, wantTotal: 8, wantRnd: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, rec := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, loopGraph(tc.extra)), Inputs: map[string]any{"q": "x"}})
			if res.Status != RunSucceeded {
				t.Fatalf("%s %s", res.Status, res.Error)
			}
			checkOrder(t, rec)
			if res.Outputs["total"] != tc.wantTotal || res.Outputs["rounds"] != tc.wantRnd {
				t.Errorf("outputs %v", res.Outputs)
			}
			next := 0
			for _, e := range rec.events {
				if _, ok := e.(*LoopNext); ok {
					next++
				}
			}
			if float64(next) != tc.wantRnd {
				t.Errorf("%d loop_next events", next)
			}
		})
	}
}

func TestLoopEnd(t *testing.T) {
	src := loopGraph("")
	src = strings.Replace(src, "  - id: end\n", `  - id: le
    parentId: lp
    data: {type: loop-end, title: LE, isInLoop: true}
  - id: end
`, 1)
	src += edge("as", "source", "le")
	res, _ := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, src), Inputs: map[string]any{"q": "x"}})
	if res.Status != RunSucceeded || res.Outputs["rounds"] != float64(1) || res.Outputs["total"] != float64(2) {
		t.Fatalf("%s %s %v", res.Status, res.Error, res.Outputs)
	}
}

// barrier is a test server whose requests all wait until n of them have
// arrived, then are answered together (and the next n wait again). If
// rounds did not overlap, a request would wait alone and, after a long
// safety delay, be answered "alone" instead of with its path. It records
// the most requests it ever held at once.
type barrier struct {
	n int

	mu       sync.Mutex
	waiting  int
	release  chan struct{}
	inflight int
	peak     int
}

func newBarrier(t *testing.T, n int) (*barrier, *httptest.Server) {
	b := &barrier{n: n, release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.inflight++
		b.peak = max(b.peak, b.inflight)
		b.waiting++
		ch := b.release
		if b.waiting == b.n {
			close(ch)
			b.release, b.waiting = make(chan struct{}), 0
		}
		b.mu.Unlock()
		answer := strings.TrimPrefix(r.URL.Path, "/")
		select {
		case <-ch:
		case <-r.Context().Done():
			answer = "gone"
		case <-time.After(20 * time.Second):
			answer = "alone"
		}
		b.mu.Lock()
		b.inflight--
		b.mu.Unlock()
		w.Write([]byte(answer))
	}))
	t.Cleanup(srv.Close)
	return b, srv
}

func (b *barrier) maxInFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// httpIterGraph is an iteration whose rounds each send one GET to
// url/<item> and output the response body.
func httpIterGraph(items, url, extra string) string {
	return graph(`
  - id: arr
    data: {type: code, title: Arr, code_language: javascript, code: 'function main() { return {items: `+items+`} }',
      variables: [], outputs: {items: {type: 'array[string]'}}}
  - id: it
    data: {type: iteration, title: It, iterator_selector: [arr, items], output_selector: [h, body], start_node_id: its`+extra+`}
  - id: its
    parentId: it
    type: custom-iteration-start
    data: {type: iteration-start, title: S, isInIteration: true}
  - id: h
    parentId: it
    data: {type: http-request, title: H, method: get, url: '`+url+`/{{#it.item#}}', isInIteration: true, iteration_id: it}
  - id: end
    data: {type: end, title: End, outputs: [{variable: out, value_selector: [it, output]}]}`,
		edge("start", "source", "arr"), edge("arr", "source", "it"), edge("its", "source", "h"), edge("it", "source", "end"))
}

// TestParallelIterationOverlaps proves that parallel rounds are in flight
// at the same time without measuring time: the server answers only once
// parallel_nums requests wait on it together.
func TestParallelIterationOverlaps(t *testing.T) {
	tests := []struct {
		name     string
		items    string
		extra    string
		together int // requests the server waits for, and the expected peak
		want     string
	}{
		{name: "all rounds at once", items: `["a","b","c","d"]`, extra: ", is_parallel: true, parallel_nums: 4", together: 4, want: `["a","b","c","d"]`},
		{name: "two slots for six items", items: `["a","b","c","d","e","f"]`, extra: ", is_parallel: true, parallel_nums: 2", together: 2, want: `["a","b","c","d","e","f"]`},
		{name: "parallel_nums defaults to 10", items: `["a","b","c"]`, extra: ", is_parallel: true", together: 3, want: `["a","b","c"]`},
		{name: "parallel_nums is capped at 10", items: `["a","b","c","d","e","f","g","h","i","j"]`, extra: ", is_parallel: true, parallel_nums: 50", together: 10, want: `["a","b","c","d","e","f","g","h","i","j"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, srv := newBarrier(t, tc.together)
			res, rec := run1(t, localEngine(), RunInput{Workflow: graphYAML(t, httpIterGraph(tc.items, srv.URL, tc.extra)), Inputs: map[string]any{"q": "x"}})
			if res.Status != RunSucceeded {
				t.Fatalf("%s %s", res.Status, res.Error)
			}
			checkOrder(t, rec)
			if got := strings.ReplaceAll(Text(res.Outputs["out"]), " ", ""); got != tc.want {
				t.Errorf("output %s, want %s", got, tc.want)
			}
			if p := b.maxInFlight(); p != tc.together {
				t.Errorf("%d requests in flight at most, want %d", p, tc.together)
			}
		})
	}
}

// TestParallelIterationEvents checks the events of a parallel iteration:
// one iteration_next per round, each before the inner nodes of its round,
// and inner node events that name the round they ran in.
func TestParallelIterationEvents(t *testing.T) {
	body := `function main({item, index}) { return {result: index + ":" + item} }`
	src := iterGraph(`["a","b","c","d","e"]`, body, ", is_parallel: true, parallel_nums: 3")
	res, rec := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, src), Inputs: map[string]any{"q": "x"}})
	if res.Status != RunSucceeded {
		t.Fatal(res.Error)
	}
	checkOrder(t, rec)
	announced := map[int]bool{}
	var completed *ContainerCompletedData
	for _, e := range rec.events {
		switch x := e.(type) {
		case *IterationNext:
			if announced[x.Data.Index] {
				t.Errorf("round %d announced twice", x.Data.Index)
			}
			announced[x.Data.Index] = true
		case *NodeFinished:
			if x.Data.NodeID != "body" {
				continue
			}
			round, ok := x.Data.ExecutionMetadata["iteration_index"].(int)
			want := strings.SplitN(Text(x.Data.Outputs["result"]), ":", 2)[0]
			if !ok || Text(float64(round)) != want {
				t.Errorf("body of round %s has iteration_index %v", want, x.Data.ExecutionMetadata["iteration_index"])
			}
			if !announced[round] {
				t.Errorf("body of round %d finished before iteration_next", round)
			}
		case *IterationCompleted:
			completed = &x.Data
		}
	}
	if len(announced) != 5 {
		t.Errorf("%d rounds announced", len(announced))
	}
	if completed == nil || completed.Steps != 5 || completed.Status != NodeSucceeded {
		t.Errorf("iteration_completed %+v", completed)
	}
}

// TestParallelIterationSharedVariables: assigners inside parallel rounds
// write conversation variables and the variables of an enclosing loop
// into the run's pool, while the rounds' own outputs stay in the rounds.
func TestParallelIterationSharedVariables(t *testing.T) {
	arr := `
  - id: arr
    data: {type: code, title: Arr, code_language: javascript, code: 'function main() { return {items: ["a","b","c"]} }',
      variables: [], outputs: {items: {type: 'array[string]'}}}`
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, res *Result)
	}{
		{
			name: "conversation variable",
			src: `conversation_variables:
  - {name: seen, value_type: string, value: 'no'}
` + graph(arr+`
  - id: it
    data: {type: iteration, title: It, iterator_selector: [arr, items], output_selector: [arr, items], start_node_id: its, is_parallel: true}
  - id: its
    parentId: it
    type: custom-iteration-start
    data: {type: iteration-start, title: S, isInIteration: true}
  - id: as
    parentId: it
    data: {type: assigner, title: As, version: '2', isInIteration: true, iteration_id: it,
      items: [{variable_selector: [conversation, seen], input_type: constant, operation: over-write, value: 'yes'}]}
  - id: end
    data: {type: end, title: End, outputs: [{variable: seen, value_selector: [conversation, seen]}]}`,
				edge("start", "source", "arr"), edge("arr", "source", "it"), edge("its", "source", "as"), edge("it", "source", "end")),
			check: func(t *testing.T, res *Result) {
				if res.ConversationVariables["seen"] != "yes" || res.Outputs["seen"] != "yes" {
					t.Errorf("conversation variables %v, outputs %v", res.ConversationVariables, res.Outputs)
				}
			},
		},
		{
			name: "variable of the enclosing loop",
			src: graph(arr+`
  - id: lp
    data: {type: loop, title: Lp, start_node_id: ls, loop_count: 1, logical_operator: and,
      loop_variables: [{label: total, var_type: number, value_type: constant, value: 1}]}
  - id: ls
    parentId: lp
    type: custom-loop-start
    data: {type: loop-start, title: LS, isInLoop: true}
  - id: it
    parentId: lp
    data: {type: iteration, title: It, iterator_selector: [arr, items], output_selector: [arr, items], start_node_id: its,
      is_parallel: true, isInLoop: true, loop_id: lp}
  - id: its
    parentId: it
    type: custom-iteration-start
    data: {type: iteration-start, title: S, isInIteration: true}
  - id: as
    parentId: it
    data: {type: assigner, title: As, version: '2', isInIteration: true, iteration_id: it,
      items: [{variable_selector: [lp, total], input_type: constant, operation: over-write, value: 7}]}
  - id: end
    data: {type: end, title: End, outputs: [{variable: total, value_selector: [lp, total]}]}`,
				edge("start", "source", "arr"), edge("arr", "source", "lp"), edge("ls", "source", "it"), edge("its", "source", "as"), edge("lp", "source", "end")),
			check: func(t *testing.T, res *Result) {
				if Text(res.Outputs["total"]) != "7" {
					t.Errorf("outputs %v", res.Outputs)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, rec := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, tc.src), Inputs: map[string]any{"q": "x"}})
			if res.Status != RunSucceeded {
				t.Fatalf("%s %s %s", res.Status, res.Error, rec.trace())
			}
			checkOrder(t, rec)
			tc.check(t, res)
		})
	}
}

// TestLoopErrorHandleMode: a loop whose round 1 fails (its code node
// throws when total is 4) either fails or carries on, by error_handle_mode.
func TestLoopErrorHandleMode(t *testing.T) {
	tests := []struct {
		name       string
		mode       string
		wantStatus string
		wantErr    string
		wantTotal  float64
	}{
		{name: "terminated by default", wantStatus: RunFailed, wantErr: "failed in round 1"},
		{name: "terminated", mode: "terminated", wantStatus: RunFailed, wantErr: "failed in round 1"},
		{name: "continue-on-error runs every round", mode: "continue-on-error", wantStatus: RunSucceeded, wantTotal: 32},
		{name: "remove-abnormal-output runs every round", mode: "remove-abnormal-output", wantStatus: RunSucceeded, wantTotal: 32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			extra := ""
			if tc.mode != "" {
				extra = ", error_handle_mode: " + tc.mode
			}
			src := loopGraph(extra)
			src = strings.Replace(src, "  - id: end\n", `  - id: boom
    parentId: lp
    data: {type: code, title: Boom, code_language: javascript, isInLoop: true, loop_id: lp,
      code: 'function main({total}) { if (total === 4) throw new Error("four"); return {} }',
      variables: [{variable: total, value_selector: [lp, total]}], outputs: {}}
  - id: end
`, 1)
			src += edge("as", "source", "boom")
			res, rec := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, src), Inputs: map[string]any{"q": "x"}})
			if res.Status != tc.wantStatus {
				t.Fatalf("status %s (%s), want %s", res.Status, res.Error, tc.wantStatus)
			}
			checkOrder(t, rec)
			if tc.wantErr != "" && !strings.Contains(res.Error, tc.wantErr) {
				t.Errorf("error %q, want %q", res.Error, tc.wantErr)
			}
			if tc.wantStatus == RunSucceeded && (res.Outputs["total"] != tc.wantTotal || res.Outputs["rounds"] != float64(5)) {
				t.Errorf("outputs %v", res.Outputs)
			}
		})
	}
}
