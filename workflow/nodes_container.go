package workflow

import (
	"fmt"
	"time"
)

func init() {
	executors["iteration"] = runIteration
	executors["loop"] = runLoop
	// The markers inside containers only mark where the inner graph
	// begins or (loop-end) where a round stops the loop.
	for _, k := range []string{"iteration-start", "loop-start", "loop-end"} {
		executors[k] = func(*nodeRun) (*outcome, error) { return &outcome{}, nil }
	}
}

// Error handling modes of an iteration.
const (
	iterTerminated    = "terminated"
	iterContinue      = "continue-on-error"
	iterRemoveAbnomal = "remove-abnormal-output"
)

// round records which round of a container is running, for the
// execution metadata of the nodes inside it.
func (r *run) setRound(containerID string, i int) {
	r.mu.Lock()
	if r.rounds == nil {
		r.rounds = map[string]int{}
	}
	r.rounds[containerID] = i
	r.mu.Unlock()
}

func (r *run) round(containerID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rounds[containerID]
}

// resetInner forgets the outputs the inner nodes left in the previous
// round, so that a round never reads a stale value.
func resetInner(x *nodeRun) {
	for _, n := range x.n.sub.nodes {
		x.pool.Drop(n.id)
	}
}

// completed builds the data of iteration_completed / loop_completed.
func (x *nodeRun) completed(inputs, outputs map[string]any, err error, tokens, steps int) ContainerCompletedData {
	d := ContainerCompletedData{
		ID: x.execID, NodeID: x.n.id, NodeType: x.n.kind, Title: x.n.title,
		Inputs: x.pool.redactMap(plainMap(inputs)), Outputs: x.pool.redactMap(plainMap(outputs)),
		CreatedAt: x.created.Unix(), Extras: map[string]any{}, Status: NodeSucceeded,
		ElapsedTime: time.Since(x.created).Seconds(), TotalTokens: tokens,
		ExecutionMetadata: map[string]any{"total_tokens": tokens}, FinishedAt: time.Now().Unix(), Steps: steps,
	}
	if d.Outputs == nil {
		d.Outputs = map[string]any{}
	}
	if err != nil {
		msg := x.pool.Redact(err.Error())
		d.Status, d.Error = NodeFailed, &msg
	}
	return d
}

// runIteration runs the inner graph once per item of the iterator
// array, with [iteration, item] and [iteration, index] set, and collects
// the output selector's value of each round. Rounds run one after the
// other even when is_parallel is set: inner nodes share the run's pool,
// so parallel rounds would need a pool per round, which is left for later.
// The result is the same as Dify's parallel mode, only slower.
func runIteration(x *nodeRun) (*outcome, error) {
	n := x.n
	if n.sub == nil {
		return nil, nodeErr("IterationNodeError", "The iteration %q has no start node inside it.", n.title)
	}
	v := x.get(selectorOf(x.d["iterator_selector"]))
	var items []any
	if v != nil {
		list, ok := asList(v)
		if !ok {
			return nil, nodeErr("IteratorVariableError", "The iteration %q needs an array to iterate over, not %s.", n.title, TypeOf(v))
		}
		items = list
	}
	inputs := map[string]any{"iterator_selector": items}
	outSel := selectorOf(x.d["output_selector"])
	mode := asString(x.d["error_handle_mode"])
	if mode == "" {
		mode = iterTerminated
	}
	x.r.emit(&IterationStarted{Envelope: x.r.envelope(EventIterationStarted), Data: ContainerStartedData{
		ID: x.execID, NodeID: n.id, NodeType: n.kind, Title: n.title, CreatedAt: x.created.Unix(),
		Inputs: x.pool.redactMap(plainMap(inputs)), Metadata: map[string]any{"iterator_length": len(items)}, Extras: map[string]any{},
	}})
	outs := []any{}
	tokens, steps := 0, 0
	var fail error
	for i, item := range items {
		if x.ctx.Err() != nil {
			fail = fmt.Errorf("The iteration %q was interrupted.", n.title)
			break
		}
		resetInner(x)
		x.pool.Set(n.id, "item", item)
		x.pool.Set(n.id, "index", float64(i))
		x.r.setRound(n.id, i)
		x.r.emit(&IterationNext{Envelope: x.r.envelope(EventIterationNext), Data: ContainerNextData{
			ID: x.execID, NodeID: n.id, NodeType: n.kind, Title: n.title, Index: i, CreatedAt: time.Now().Unix(), Extras: map[string]any{},
		}})
		wr := x.r.walk(x.ctx, n.sub)
		tokens += wr.tokens
		steps++
		if wr.fail != "" {
			switch mode {
			case iterContinue:
				outs = append(outs, nil)
				continue
			case iterRemoveAbnomal:
				continue
			}
			fail = nodeErr("IterationNodeError", "The iteration %q failed on item %d: %s", n.title, i, wr.fail)
			break
		}
		val, _ := x.pool.Get(outSel)
		outs = append(outs, val)
	}
	if fail == nil && flattenOutput(x.d) {
		outs = flatten(outs)
	}
	outputs := map[string]any{"output": outs}
	if fail != nil {
		outputs = nil
	}
	x.r.emit(&IterationCompleted{Envelope: x.r.envelope(EventIterationCompleted), Data: x.completed(inputs, outputs, fail, tokens, steps)})
	if fail != nil {
		return &outcome{inputs: inputs, tokens: tokens}, fail
	}
	return &outcome{inputs: inputs, outputs: outputs, tokens: tokens}, nil
}

// flattenOutput reads flatten_output, true unless set to false.
func flattenOutput(d map[string]any) bool {
	v, ok := d["flatten_output"]
	return !ok || v == nil || asBool(v)
}

// flatten joins the rounds' outputs into one array when every one of
// them is an array; otherwise the outputs stay as they are.
func flatten(outs []any) []any {
	if len(outs) == 0 {
		return outs
	}
	var flat []any
	for _, o := range outs {
		list, ok := asList(o)
		if !ok {
			return outs
		}
		flat = append(flat, list...)
	}
	if flat == nil {
		flat = []any{}
	}
	return flat
}

// maxLoopCount caps loop_count; the run's step limit applies as well.
const maxLoopCount = 1000

// runLoop runs the inner graph up to loop_count times. Loop variables
// live under the loop's id ([loop, label]) and keep what inner nodes (an
// assigner) write into them from one round to the next. The loop stops
// early when its break conditions hold (checked before the first round
// and after each one) or when a round reaches a loop-end node.
func runLoop(x *nodeRun) (*outcome, error) {
	n := x.n
	if n.sub == nil {
		return nil, nodeErr("LoopNodeError", "The loop %q has no start node inside it.", n.title)
	}
	count := 1
	if f, ok := parseNumber(x.d["loop_count"]); ok && f >= 1 {
		count = int(f)
	}
	count = min(count, maxLoopCount)
	inputs := map[string]any{"loop_count": float64(count)}
	var labels []string
	for _, lv := range asList2(x.d["loop_variables"]) {
		label := asString(lv["label"])
		if label == "" {
			continue
		}
		var val any
		if asString(lv["value_type"]) == "variable" {
			val = x.get(selectorOf(lv["value"]))
		} else {
			val = lv["value"]
			if s, ok := val.(string); ok {
				val = x.pool.Render(s)
			}
			val = coerce(asString(lv["var_type"]), val)
		}
		x.pool.Set(n.id, label, val)
		x.r.addLoopVar(n.id, label)
		inputs[label] = val
		labels = append(labels, label)
	}
	conds := asList2(x.d["break_conditions"])
	logical := asString(x.d["logical_operator"])
	shouldBreak := func() (bool, error) {
		if len(conds) == 0 {
			return false, nil
		}
		ok, _, err := x.evalConditions(logical, conds, func(c map[string]any) any {
			return x.get(selectorOf(c["variable_selector"]))
		})
		return ok, err
	}
	x.r.emit(&LoopStarted{Envelope: x.r.envelope(EventLoopStarted), Data: ContainerStartedData{
		ID: x.execID, NodeID: n.id, NodeType: n.kind, Title: n.title, CreatedAt: x.created.Unix(),
		Inputs: x.pool.redactMap(plainMap(inputs)), Metadata: map[string]any{"loop_count": count}, Extras: map[string]any{},
	}})
	tokens, rounds := 0, 0
	var fail error
	stop, err := shouldBreak()
	if err != nil {
		fail = nodeErr("LoopNodeError", "The break conditions of the loop %q failed: %v", n.title, err)
	}
	for i := 0; fail == nil && !stop && i < count; i++ {
		if x.ctx.Err() != nil {
			fail = fmt.Errorf("The loop %q was interrupted.", n.title)
			break
		}
		resetInner(x)
		x.r.setRound(n.id, i)
		x.r.emit(&LoopNext{Envelope: x.r.envelope(EventLoopNext), Data: ContainerNextData{
			ID: x.execID, NodeID: n.id, NodeType: n.kind, Title: n.title, Index: i, CreatedAt: time.Now().Unix(), Extras: map[string]any{},
		}})
		wr := x.r.walk(x.ctx, n.sub)
		tokens += wr.tokens
		rounds++
		if wr.fail != "" {
			fail = nodeErr("LoopNodeError", "The loop %q failed in round %d: %s", n.title, i, wr.fail)
			break
		}
		if wr.loopEnd {
			break
		}
		if stop, err = shouldBreak(); err != nil {
			fail = nodeErr("LoopNodeError", "The break conditions of the loop %q failed: %v", n.title, err)
		}
	}
	outputs := map[string]any{"loop_round": float64(rounds)}
	for _, l := range labels {
		outputs[l] = x.get([]string{n.id, l})
	}
	if fail != nil {
		outputs = nil
	}
	x.r.emit(&LoopCompleted{Envelope: x.r.envelope(EventLoopCompleted), Data: x.completed(inputs, outputs, fail, tokens, rounds)})
	if fail != nil {
		return &outcome{inputs: inputs, tokens: tokens}, fail
	}
	return &outcome{inputs: inputs, outputs: outputs, tokens: tokens}, nil
}

// addLoopVar records a loop variable, which assigners may then write.
func (r *run) addLoopVar(loopID, label string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loopVars == nil {
		r.loopVars = map[string]map[string]bool{}
	}
	if r.loopVars[loopID] == nil {
		r.loopVars[loopID] = map[string]bool{}
	}
	r.loopVars[loopID][label] = true
}

func (r *run) isLoopVar(loopID, label string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loopVars[loopID][label]
}
