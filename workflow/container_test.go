package workflow

import (
	"strings"
	"testing"
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
		{name: "parallel runs in order", items: `["a","b"]`, body: okBody, extra: ", is_parallel: true, parallel_nums: 5", wantStatus: RunSucceeded, want: `["0:a","1:b"]`},
		{name: "terminated stops the run", items: `["a","b","c"]`, body: failB, wantStatus: RunFailed, wantErr: "failed on item 1"},
		{name: "continue-on-error keeps a null", items: `["a","b","c"]`, body: failB, extra: ", error_handle_mode: continue-on-error", wantStatus: RunSucceeded, want: `["a",null,"c"]`},
		{name: "remove-abnormal-output drops it", items: `["a","b","c"]`, body: failB, extra: ", error_handle_mode: remove-abnormal-output", wantStatus: RunSucceeded, want: `["a","c"]`},
		{name: "array outputs are flattened", items: `["a","b"]`, body: listBody, wantStatus: RunSucceeded, want: `["a","a","b","b"]`},
		{name: "flatten_output false keeps nesting", items: `["a","b"]`, body: listBody, extra: ", flatten_output: false", wantStatus: RunSucceeded, want: `[["a","a"],["b","b"]]`},
		{name: "not an array", items: `"x"`, body: okBody, wantStatus: RunFailed, wantErr: "needs an array"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, rec := run1(t, &Engine{}, RunInput{Workflow: graphYAML(t, iterGraph(tc.items, tc.body, tc.extra)), Inputs: map[string]any{"q": "x"}})
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
