package workflow

import (
	"appkb/internal/apps"
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"appkb/internal/platform/jsonnum"
	"appkb/internal/platform/metrics"
	"appkb/models"
)

// nodeRun is one attempt at executing a node.
type nodeRun struct {
	ctx  context.Context
	r    *run
	n    *gnode
	d    map[string]any
	pool *Pool
	// execID is the node execution id of the attempt.
	execID  string
	created time.Time
}

// get resolves a selector, treating a missing variable as nil.
func (x *nodeRun) get(sel []string) any {
	v, _ := x.pool.Get(sel)
	return v
}

// executor runs one kind of node.
type executor func(x *nodeRun) (*outcome, error)

// runMarker runs the markers inside containers, which only say where the
// inner graph begins or (loop-end) where a round stops the loop.
func runMarker(*nodeRun) (*outcome, error) { return &outcome{}, nil }

func runExecutor(x *nodeRun) (out *outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			x.r.e.logger().Error("workflow: node panicked", "node", x.n.id, "kind", x.n.kind, "panic", p, "stack", string(debug.Stack()))
			out, err = nil, nodeErr("InternalError", "The %s node %q crashed: %v", x.n.kind, x.n.title, p)
		}
	}()
	k, ok := nodeKinds[x.n.kind]
	if !ok {
		return nil, nodeErr("NotSupported", "The node type %q (node %q) is not supported yet.", x.n.kind, x.n.title)
	}
	return k.run(x)
}

// retryConfig reads retry_config.
func retryConfig(d map[string]any) (tries int, interval time.Duration) {
	rc := asMap(d["retry_config"])
	if rc == nil || (rc["retry_enabled"] != nil && !asBool(rc["retry_enabled"])) {
		return 0, 0
	}
	n, _ := jsonnum.Number(rc["max_retries"])
	ms, _ := jsonnum.Number(rc["retry_interval"])
	if n > 10 {
		n = 10
	}
	if ms > 5000 {
		ms = 5000
	}
	return int(n), time.Duration(ms) * time.Millisecond
}

// execute runs a node with its retries and error strategy, emitting
// node_started, node_retry and node_finished, and stores the outputs in
// the pool.
func (r *run) execute(ctx context.Context, n *gnode, index int, pred *string) finished {
	created := time.Now()
	base := NodeFinishedData{
		ID: models.NewID(), NodeID: n.id, NodeType: n.kind, Title: n.title, Index: index,
		PredecessorNodeID: pred, CreatedAt: created.Unix(), Files: []any{},
	}
	inside := r.nameContainer(n, &base)
	r.emit(&NodeStarted{Envelope: r.envelope(EventNodeStarted), Data: NodeStartedData{
		ID: base.ID, NodeID: n.id, NodeType: n.kind, Title: n.title, Index: index,
		PredecessorNodeID: pred, Inputs: map[string]any{}, CreatedAt: base.CreatedAt, Extras: map[string]any{},
		IterationID: base.IterationID, LoopID: base.LoopID,
	}})
	maxRetries, interval := retryConfig(n.data)
	var (
		out *outcome
		err error
	)
	for attempt := 0; ; attempt++ {
		x := &nodeRun{ctx: ctx, r: r, n: n, d: n.data, pool: r.pool, execID: base.ID, created: created}
		t0 := time.Now()
		out, err = runExecutor(x)
		if err == nil || ctx.Err() != nil || attempt >= maxRetries {
			break
		}
		rd := base
		rd.Status = NodeRetrying
		msg := r.pool.Redact(err.Error())
		rd.Error = &msg
		rd.ElapsedTime = time.Since(t0).Seconds()
		rd.FinishedAt = time.Now().Unix()
		if out != nil {
			rd.Inputs, rd.ProcessData, rd.Outputs = r.pool.redactMap(plainMap(out.inputs)), r.pool.redactMap(plainMap(out.process)), r.pool.redactMap(plainMap(out.outputs))
		}
		r.emit(&NodeRetry{Envelope: r.envelope(EventNodeRetry), Data: NodeRetryData{NodeFinishedData: rd, RetryIndex: attempt}})
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
	if err == nil && out != nil && out.pause != nil {
		// A node waiting on a form has not finished: no node_finished
		// until the run resumes and the node runs again.
		return finished{node: n, out: out, status: nodePaused}
	}
	if out == nil {
		out = &outcome{}
	}
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("The node %q was interrupted: %w", n.title, context.Cause(ctx))
	}
	fd := base
	status := NodeSucceeded
	if err != nil {
		msg := r.pool.Redact(err.Error())
		typ := "NodeError"
		if ne, ok := err.(*NodeError); ok {
			typ = ne.Type
		}
		status = NodeFailed
		if ctx.Err() == nil {
			switch asString(n.data["error_strategy"]) {
			case "fail-branch":
				status = NodeException
				out.outputs = map[string]any{"error_message": msg, "error_type": typ}
				out.handle = "fail-branch"
			case "default-value":
				status = NodeException
				out.outputs = defaultValues(n.data)
				out.outputs["error_message"] = msg
				out.outputs["error_type"] = typ
				out.handle = "source"
			}
		}
		fd.Error = &msg
		err = fmt.Errorf("%s", msg)
	}
	if status != NodeFailed {
		r.pool.SetAll(n.id, out.outputs)
	}
	fd.Status = status
	fd.Inputs, fd.ProcessData, fd.Outputs = r.pool.redactMap(plainMap(out.inputs)), r.pool.redactMap(plainMap(out.process)), r.pool.redactMap(plainMap(out.outputs))
	if fd.Inputs == nil {
		fd.Inputs = map[string]any{}
	}
	fd.ElapsedTime = time.Since(created).Seconds()
	fd.FinishedAt = time.Now().Unix()
	meta := map[string]any{}
	if out.tokens > 0 {
		meta["total_tokens"] = out.tokens
		meta["total_price"] = out.price
		meta["currency"] = out.currency
	}
	if status == NodeException {
		meta["error_strategy"] = n.data["error_strategy"]
	}
	if inside.id != "" {
		meta[inside.idKey], meta[inside.indexKey] = inside.id, inside.round
	}
	fd.ExecutionMetadata = meta
	// Stored before node_finished goes out, so that what the event
	// announces can be read back at once; a node whose record fails is
	// announced as failed, since the run fails with it.
	if r.e.Store != nil {
		if serr := r.e.Store.NodeFinished(context.WithoutCancel(ctx), &fd, r.in.RunID); serr != nil && status != NodeFailed {
			status, err = NodeFailed, fmt.Errorf("The node execution could not be recorded: %w", serr)
			msg := err.Error()
			fd.Status, fd.Error = status, &msg
		}
	}
	metrics.NodeExecution(fd.NodeType, fd.Status)
	r.emit(&NodeFinished{Envelope: r.envelope(EventNodeFinished), Data: fd})
	return finished{node: n, out: out, status: status, err: err}
}

// container names the iteration or loop a node ran in, and the round.
type container struct {
	id, idKey, indexKey string
	round               int
}

// nameContainer sets in d the iteration or loop a node inside one runs
// in, and returns it with the round for the node's metadata (zero for a
// node outside containers).
func (r *run) nameContainer(n *gnode, d *NodeFinishedData) container {
	if n.container == "" {
		return container{}
	}
	id := n.container
	round := r.round(id)
	if n.containerKind == apps.NodeLoop {
		d.LoopID = &id
		return container{id: id, idKey: "loop_id", indexKey: "loop_index", round: round}
	}
	d.IterationID = &id
	return container{id: id, idKey: "iteration_id", indexKey: "iteration_index", round: round}
}

// defaultValues reads default_value [{key, type, value}].
func defaultValues(d map[string]any) map[string]any {
	out := map[string]any{}
	for _, item := range asList2(d["default_value"]) {
		k := asString(item["key"])
		if k == "" {
			continue
		}
		out[k] = coerce(asString(item["type"]), item["value"])
	}
	return out
}

// Supports reports whether the engine can run nodes of the kind.
func Supports(kind string) bool {
	_, ok := nodeKinds[kind]
	return ok
}
