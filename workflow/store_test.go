package workflow

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// orderLog records, in one sequence, what a run stored and what it emitted.
type orderLog struct {
	mu  sync.Mutex
	log []string
}

func (o *orderLog) add(s string) {
	o.mu.Lock()
	o.log = append(o.log, s)
	o.mu.Unlock()
}

func (o *orderLog) RunStarted(context.Context, *RunRecord) error { o.add("stored start"); return nil }
func (o *orderLog) RunResumed(context.Context, *RunRecord) error { o.add("stored resume"); return nil }
func (o *orderLog) NodeFinished(context.Context, *NodeFinishedData, string) error {
	o.add("stored node")
	return nil
}
func (o *orderLog) RunFinished(_ context.Context, _ *RunRecord, res *Result) error {
	o.add("stored end " + res.Status)
	return nil
}

// TestRunRecordedBeforeItsEvents checks that the start and the end of a
// run are stored before the events that announce them go out: a client
// that reads the run as soon as it sees workflow_finished (possibly on
// another replica) must find it ended, not still running.
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
			before("stored end "+tc.status, "emitted "+EventWorkflowFinished)
		})
	}
}
