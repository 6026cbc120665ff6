package workflow

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"time"
)

// Error handling modes (error_handle_mode) of an iteration or a loop.
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
// the output selector's value of each round, in the order of the items.
// With is_parallel, up to parallel_nums rounds run at once (see
// iteration.parallel); otherwise, or when the engine runs one node at a time,
// they run one after the other on the run's pool.
func runIteration(x *nodeRun) (*outcome, error) {
	n := x.n
	if n.sub == nil {
		return nil, nodeErr("IterationNodeError", "The iteration %q has no start node inside it.", n.title)
	}
	cfg := n.cfg.(*iterationConfig)
	v := x.get(cfg.iterator)
	var items []any
	if v != nil {
		list, ok := asList(v)
		if !ok {
			return nil, nodeErr("IteratorVariableError", "The iteration %q needs an array to iterate over, not %s.", n.title, TypeOf(v))
		}
		items = list
	}
	inputs := map[string]any{"iterator_selector": items}
	it := iteration{x: x, items: items, outSel: cfg.output, mode: cfg.mode}
	x.r.emit(&IterationStarted{Envelope: x.r.envelope(EventIterationStarted), Data: ContainerStartedData{
		ID: x.execID, NodeID: n.id, NodeType: n.kind, Title: n.title, CreatedAt: x.created.Unix(),
		Inputs: x.pool.redactMap(plainMap(inputs)), Metadata: map[string]any{"iterator_length": len(items)}, Extras: map[string]any{},
	}})
	var rounds []roundResult
	if par := parallelRounds(x, cfg); par > 1 && len(items) > 1 {
		rounds = it.parallel(par)
	} else {
		rounds = it.inOrder()
	}
	outs, tokens, steps, fail := it.collect(rounds)
	if fail == nil && cfg.flatten {
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

// Bounds of parallel_nums.
const (
	defaultParallelNums = 10
	maxParallelNums     = 10
)

// errorHandleMode reads error_handle_mode, terminated when unset.
func errorHandleMode(d map[string]any) string {
	switch m := asString(d["error_handle_mode"]); m {
	case iterContinue, iterRemoveAbnomal:
		return m
	}
	return iterTerminated
}

// parallelRounds is how many rounds of an iteration may run at once: 1
// unless is_parallel is set, else parallel_nums (default 10, at most 10).
// An engine that runs one node at a time (Parallelism 1) runs rounds one
// at a time too, which keeps such runs deterministic.
func parallelRounds(x *nodeRun, cfg *iterationConfig) int {
	if !cfg.parallel || x.r.e.Parallelism == 1 {
		return 1
	}
	par := defaultParallelNums
	if cfg.parallelNums != 0 {
		par = cfg.parallelNums
	}
	return max(1, min(par, maxParallelNums))
}

// iteration is one execution of an iteration node.
type iteration struct {
	x      *nodeRun
	items  []any
	outSel []string
	mode   string
}

// roundResult is how one round of an iteration went.
type roundResult struct {
	ran    bool
	output any
	// fail is the error that ended the round, "" when it completed.
	fail   string
	tokens int
}

// next announces a round.
func (it *iteration) next(i int) {
	x := it.x
	x.r.emit(&IterationNext{Envelope: x.r.envelope(EventIterationNext), Data: ContainerNextData{
		ID: x.execID, NodeID: x.n.id, NodeType: x.n.kind, Title: x.n.title, Index: i, CreatedAt: time.Now().Unix(), Extras: map[string]any{},
	}})
}

// stops reports whether a failed round ends the iteration.
func (it *iteration) stops(res roundResult) bool {
	return res.fail != "" && it.mode == iterTerminated
}

// inOrder runs the rounds one after the other on the run's own pool and
// state; inner outputs are cleared before each round.
func (it *iteration) inOrder() []roundResult {
	x, n := it.x, it.x.n
	results := make([]roundResult, len(it.items))
	for i, item := range it.items {
		if x.ctx.Err() != nil {
			break
		}
		resetInner(x)
		x.pool.Set(n.id, "item", item)
		x.pool.Set(n.id, "index", float64(i))
		x.r.setRound(n.id, i)
		it.next(i)
		wr := x.r.walk(x.ctx, n.sub)
		res := roundResult{ran: true, fail: wr.fail, tokens: wr.tokens}
		if wr.fail == "" {
			res.output, _ = x.pool.Get(it.outSel)
		}
		results[i] = res
		if it.stops(res) {
			break
		}
	}
	return results
}

// parallel runs up to par rounds at once, each in a round scope of its
// own (see newRound): inner nodes read the run's variables as they were
// when the round began and keep their outputs to the round, and the
// conversation and loop variables the round changes are written back to
// the run's pool when it ends. Rounds start in item order and their
// results land at their item's place whatever order they finish in.
// Under the terminated mode the first failed round stops the launching of
// new rounds and interrupts the ones still running.
func (it *iteration) parallel(par int) []roundResult {
	x, n := it.x, it.x.n
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	results := make([]roundResult, len(it.items))
	var (
		mu      sync.Mutex
		stopped bool
		wg      sync.WaitGroup
	)
	slots := make(chan struct{}, par)
	for i, item := range it.items {
		slots <- struct{}{}
		mu.Lock()
		stop := stopped
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		rd := newRound(x.r, n, i, item)
		it.next(i)
		wg.Add(1)
		go func() {
			defer func() { <-slots }()
			defer wg.Done()
			wr := rd.r.walk(ctx, n.sub)
			rd.finish(x.r)
			res := roundResult{ran: true, fail: wr.fail, tokens: wr.tokens}
			if wr.fail == "" {
				res.output, _ = rd.r.pool.Get(it.outSel)
			}
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				// Interrupted because another round failed: that
				// round's failure is the one to report.
				results[i] = roundResult{tokens: res.tokens}
				return
			}
			results[i] = res
			if it.stops(res) {
				stopped = true
				cancel()
			}
		}()
	}
	wg.Wait()
	return results
}

// collect turns the rounds' results into the iteration's output, in item
// order, applying the error handling mode: continue-on-error keeps a null
// for a failed round, remove-abnormal-output leaves it out, terminated
// fails the node with the first failed round's error.
func (it *iteration) collect(results []roundResult) (outs []any, tokens, steps int, fail error) {
	x, n := it.x, it.x.n
	outs = []any{}
	interrupted := false
	for i, res := range results {
		tokens += res.tokens
		if !res.ran {
			interrupted = interrupted || x.ctx.Err() != nil
			continue
		}
		steps++
		switch {
		case res.fail == "":
			outs = append(outs, res.output)
		case it.mode == iterContinue:
			outs = append(outs, nil)
		case it.mode == iterRemoveAbnomal:
		case fail == nil:
			fail = nodeErr("IterationNodeError", "The iteration %q failed on item %d: %s", n.title, i, res.fail)
		}
	}
	if fail == nil && interrupted {
		fail = fmt.Errorf("The iteration %q was interrupted.", n.title)
	}
	return outs, tokens, steps, fail
}

// round is the scope one parallel round runs in: a run of its own that
// shares the engine, graph, inputs and event stream of the parent run but
// has its own pool (a fork of the parent's), its own round numbers and
// its own counters, which finish adds back to the parent.
type round struct {
	r *run
	// steps is the parent's step count when the round began; the
	// round's run counts on from there.
	steps int64
	// conv and loops hold the conversation and loop variables as the
	// round saw them at its start, to find the ones it changed.
	conv  map[string]any
	loops map[string]map[string]any
}

// newRound makes the scope of round i of the iteration n over item.
//
// Keep it in step with the fields of run: every field is either shared
// with the parent (read-only after the run starts), derived from it, or
// per round and merged back by finish.
func newRound(parent *run, n *gnode, i int, item any) *round {
	c := &run{
		e: parent.e, g: parent.g, in: parent.in, env: parent.env, start: parent.start,
		pool: parent.pool.fork(),
		// Events go through the parent, whose lock keeps them one at a
		// time.
		emitFn:   parent.emit,
		streamed: map[string]bool{},
		convVars: parent.convVars,
		rounds:   map[string]int{},
		loopVars: map[string]map[string]bool{},
	}
	parent.mu.Lock()
	for k, v := range parent.rounds {
		c.rounds[k] = v
	}
	for id, labels := range parent.loopVars {
		c.loopVars[id] = maps.Clone(labels)
	}
	parent.mu.Unlock()
	c.rounds[n.id] = i
	for _, in := range n.sub.nodes {
		c.pool.Drop(in.id)
	}
	c.pool.Set(n.id, "item", item)
	c.pool.Set(n.id, "index", float64(i))
	rd := &round{r: c, steps: parent.steps.Load(), conv: c.pool.Scope(ScopeConversation), loops: map[string]map[string]any{}}
	c.steps.Store(rd.steps)
	for id := range c.loopVars {
		rd.loops[id] = c.pool.Scope(id)
	}
	return rd
}

// finish merges what the round did into the parent run: its steps,
// handled exceptions and answer text, and the conversation and loop
// variables it changed (the last round to finish wins when two change the
// same one).
func (rd *round) finish(parent *run) {
	c := rd.r
	parent.steps.Add(c.steps.Load() - rd.steps)
	parent.exceptions.Add(c.exceptions.Load())
	c.mu.Lock()
	answer := c.answer.String()
	streamed := maps.Clone(c.streamed)
	c.mu.Unlock()
	parent.mu.Lock()
	parent.answer.WriteString(answer)
	for id := range streamed {
		parent.streamed[id] = true
	}
	parent.mu.Unlock()
	writeBack(parent.pool, c.pool, ScopeConversation, rd.conv, nil)
	for id, before := range rd.loops {
		writeBack(parent.pool, c.pool, id, before, c.loopVars[id])
	}
}

// writeBack copies into dst the variables of scope that src changed since
// before was taken; when keep is not nil only the names in it count. Each
// write takes dst's lock.
func writeBack(dst, src *Pool, scope string, before map[string]any, keep map[string]bool) {
	for name, v := range src.Scope(scope) {
		if keep != nil && !keep[name] {
			continue
		}
		if old, ok := before[name]; ok && reflect.DeepEqual(old, v) {
			continue
		}
		dst.Set(scope, name, v)
	}
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
//
// A failed round fails the loop under error_handle_mode terminated (the
// default). Under continue-on-error or remove-abnormal-output (a loop
// has no per-round outputs, so the two mean the same) the loop carries on
// as if the round had completed, keeping whatever the round wrote into
// the loop variables before it failed. Dify's own engine reads no
// error_handle_mode for loops; this follows what the mode means for
// iterations.
func runLoop(x *nodeRun) (*outcome, error) {
	n := x.n
	if n.sub == nil {
		return nil, nodeErr("LoopNodeError", "The loop %q has no start node inside it.", n.title)
	}
	cfg := n.cfg.(*loopConfig)
	count := cfg.count
	inputs := map[string]any{"loop_count": float64(count)}
	var labels []string
	for _, lv := range cfg.vars {
		label := asString(lv["label"])
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
	mode, conds, logical := cfg.mode, cfg.conditions, cfg.logical
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
		if wr.fail != "" && (mode == iterTerminated || x.ctx.Err() != nil) {
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
