package workflow

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// orderLog records, in one sequence, what a run stored and what it emitted.
type orderLog struct {
	mu       sync.Mutex
	log      []string
	failNode bool // NodeFinished fails
}

func (o *orderLog) add(s string) {
	o.mu.Lock()
	o.log = append(o.log, s)
	o.mu.Unlock()
}

func (o *orderLog) RunStarted(context.Context, *RunRecord) error { o.add("stored start"); return nil }
func (o *orderLog) RunResumed(context.Context, *RunRecord) error { o.add("stored resume"); return nil }
func (o *orderLog) NodeFinished(context.Context, *NodeFinishedData, string) error {
	if o.failNode {
		return errors.New("disk full")
	}
	o.add("stored node")
	return nil
}
func (o *orderLog) RunFinished(_ context.Context, _ *RunRecord, res *Result) error {
	o.add("stored end " + res.Status)
	return nil
}

// TestRunRecordedBeforeItsEvents checks that the start of a run, its node
// executions and its end are stored before the events that announce them
// go out: a client that reads the run as soon as it sees workflow_finished
// (possibly on another replica) must find it ended, not still running.
func TestRunRecordedBeforeItsEvents(t *testing.T) {
	tests := []struct {
		name   string
		node   string
		status string
	}{
		{"a run that succeeds", `
  - id: x
    data: {type: end, title: End, outputs: []}`, RunSucceeded},
		{"a run that fails", `
  - id: x
    data: {type: code, title: Fail, code_language: javascript, code: 'function main() { throw new Error("no") }', outputs: {}}`, RunFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := graphYAML(t, graph(tc.node, edge("start", "source", "x")))
			o := &orderLog{}
			res, err := (&Engine{Store: o}).Run(context.Background(), RunInput{Workflow: w, Inputs: map[string]any{"q": "x"}},
				func(ev Event) { o.add("emitted " + ev.Name()) })
			if err != nil || res.Status != tc.status {
				t.Fatalf("res %+v err %v, want %s", res, err, tc.status)
			}
			before := func(first, then string) {
				i, j := slices.Index(o.log, first), slices.Index(o.log, then)
				if i < 0 || j < 0 || i > j {
					t.Errorf("%q should come before %q: %v", first, then, o.log)
				}
			}
			before("stored start", "emitted "+EventWorkflowStarted)
			before("stored node", "emitted "+EventNodeFinished)
			before("stored end "+tc.status, "emitted "+EventWorkflowFinished)
		})
	}
}

// TestNodeRecordFailureFailsTheRun checks that a node execution that cannot
// be stored is announced as failed, with the reason, and fails the run.
func TestNodeRecordFailureFailsTheRun(t *testing.T) {
	w := graphYAML(t, graph(`
  - id: x
    data: {type: end, title: End, outputs: []}`, edge("start", "source", "x")))
	var finished []*NodeFinishedData
	res, err := (&Engine{Store: &orderLog{failNode: true}}).Run(context.Background(),
		RunInput{Workflow: w, Inputs: map[string]any{"q": "x"}}, func(ev Event) {
			if nf, ok := ev.(*NodeFinished); ok {
				finished = append(finished, &nf.Data)
			}
		})
	if err != nil || res.Status != RunFailed || !strings.Contains(res.Error, "disk full") {
		t.Fatalf("res %+v err %v, want a failed run naming the store's error", res, err)
	}
	if len(finished) == 0 || finished[0].Status != NodeFailed || finished[0].Error == nil ||
		!strings.Contains(*finished[0].Error, "could not be recorded: disk full") {
		t.Fatalf("first node_finished %+v, want failed with the store's error", finished)
	}
}
