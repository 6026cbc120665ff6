package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"appkb/internal/apps"
	"appkb/internal/conversation/files"
	"appkb/internal/llm"
	"appkb/internal/platform/metrics"
	"appkb/internal/run/tools"
	"appkb/models"

	"github.com/google/uuid"
)

// ModelSource gives the chat model an llm node names. *llm.Registry
// implements it; a nil Engine.Models uses the builtin model for all.
type ModelSource interface {
	Chat(provider, model string) (llm.ChatModel, error)
}

// Engine runs graphs. Its zero value works: the builtin model, no
// knowledge retrieval, no storage and the default limits. An Engine is
// safe for concurrent runs.
type Engine struct {
	Models    ModelSource
	Retriever Retriever
	Store     RunStore
	// MaxSteps bounds the node executions of a run (default 500).
	MaxSteps int
	// Timeout bounds a run (default 10 minutes).
	Timeout time.Duration
	// Parallelism bounds the nodes running at once (default 4; 1 runs
	// nodes one by one in file order).
	Parallelism int
	// CodeTimeout bounds one javascript code node (default 10 s).
	CodeTimeout time.Duration
	// HTTPClient, when set, sends every request of http-request nodes
	// as is; its transport must refuse internal addresses itself.
	HTTPClient *http.Client
	// HTTPGuard decides which addresses http-request nodes may reach
	// when HTTPClient is nil; nil is the zero files.Guard, which refuses
	// loopback, private and metadata addresses.
	HTTPGuard *files.Guard
	// Transports, when set, keeps the connections of http-request nodes
	// open for later requests and runs; nil gives each request its own.
	Transports *HTTPTransports
	// Tools finds the tools of tool and agent nodes; nil knows the built-in set only.
	Tools *tools.Registry
	// Python runs python3 code nodes in a sandbox; when nil, python3
	// code nodes fail with an error saying the sandbox is unavailable.
	Python CodeRunner
	// Files reads the uploaded files that file variables point at (for
	// document-extractor nodes); when nil only remote files are read.
	Files *files.Store
	// Forms keeps the forms of human-input nodes; without it those nodes
	// fail.
	Forms FormStore
	// Knowledge serves the datasource and knowledge-index nodes of a
	// knowledge pipeline run; without it those nodes fail.
	Knowledge KnowledgeIndexer
	Logger    *slog.Logger
}

// CodeRunner runs the code of a code node in some isolated runtime. main
// receives the inputs as keyword arguments and must return an object,
// which Run returns. An error is the code's failure, in words a workflow
// author can act on.
type CodeRunner interface {
	Run(ctx context.Context, code string, inputs map[string]any) (map[string]any, error)
}

// Defaults of Engine.
const (
	DefaultMaxSteps    = 500
	DefaultTimeout     = 10 * time.Minute
	DefaultParallelism = 4
	DefaultCodeTimeout = 10 * time.Second
)

// Run modes.
const (
	ModeWorkflow = "workflow"
	ModeChatflow = "advanced-chat"
)

// RunInput is everything one run needs besides the engine.
type RunInput struct {
	// Graph is the compiled graph; when nil, Workflow is compiled.
	Graph    *Graph
	Workflow *apps.Workflow
	// Mode is ModeWorkflow or ModeChatflow.
	Mode   string
	Inputs map[string]any
	// Query is the user's message (chatflow).
	Query string
	Files []File
	// Identifiers for sys.* variables and event envelopes. TaskID and
	// RunID are generated when empty.
	UserID, AppID, WorkflowID, ConversationID, MessageID string
	TaskID, RunID                                        string
	DialogueCount                                        int
	// ConversationVariables are the values kept from earlier turns; names
	// missing here start at the file's initial values.
	ConversationVariables map[string]any
	// History is the conversation so far, oldest first, for llm memory.
	History []llm.Message
	// Resume, when set, continues the paused run RunID instead of
	// starting a new one.
	Resume *Resume
	// PipelineVariables are a knowledge pipeline run's variables by the
	// node they belong to ("shared" for all): rag.OWNER.NAME.
	PipelineVariables map[string]map[string]any
}

// Result is the outcome of a run, the same facts as workflow_finished.
type Result struct {
	RunID, TaskID, WorkflowID string
	Status                    string
	Outputs                   map[string]any
	Error                     string
	// Answer is the chatflow reply: the text of every answer node, in the
	// order they ran.
	Answer          string
	ElapsedTime     float64
	TotalTokens     int
	TotalSteps      int
	ExceptionsCount int
	// ConversationVariables are the values to keep for the next turn.
	ConversationVariables map[string]any
	// Snapshot and Forms are set when the run paused (Status RunPaused):
	// what the run needs to go on, and the forms it waits on.
	Snapshot *Snapshot
	Forms    []*HumanForm
}

// NodeError is a node failure with the error type shown in error
// strategies' error_type output.
type NodeError struct {
	Type    string
	Message string
}

func (e *NodeError) Error() string { return e.Message }

func nodeErr(typ, format string, args ...any) *NodeError {
	return &NodeError{Type: typ, Message: fmt.Sprintf(format, args...)}
}

// outcome is what a node execution produced.
type outcome struct {
	inputs, process, outputs map[string]any
	// handle is the source handle of the edges to follow ("source" when
	// empty).
	handle   string
	tokens   int
	price    float64
	currency string
	// pause is set when the node waits on this form; the run pauses.
	pause *HumanForm
}

// run is the state of one run.
type run struct {
	e     *Engine
	g     *Graph
	in    RunInput
	pool  *Pool
	env   Envelope
	start time.Time

	emitMu sync.Mutex
	emitFn func(Event)

	mu       sync.Mutex
	answer   strings.Builder
	streamed map[string]bool
	convVars map[string]bool // names of conversation variables

	// steps counts node executions, exceptions the failures an error
	// strategy handled, over the whole run including inner graphs.
	steps, exceptions atomic.Int64
	// rounds holds the round each running iteration or loop is in.
	rounds map[string]int
	// loopVars names the variables of the loops that have started.
	loopVars map[string]map[string]bool
}

// emit delivers one event, never concurrently with another.
func (r *run) emit(ev Event) {
	if r.emitFn == nil {
		return
	}
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	r.emitFn(ev)
}

func (r *run) envelope(name string) Envelope {
	env := r.env
	env.Event = name
	if env.MessageID != "" {
		env.CreatedAt = time.Now().Unix()
	}
	return env
}

func (r *run) textChunk(text string, sel []string) {
	if text == "" {
		return
	}
	if r.in.Mode == ModeChatflow {
		r.mu.Lock()
		r.answer.WriteString(text)
		r.mu.Unlock()
	}
	r.emit(&TextChunk{Envelope: r.envelope(EventTextChunk), Data: TextChunkData{Text: text, FromVariableSelector: sel}})
}

func (e *Engine) logger() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.Default()
}

// prepareInput checks a run's input and fills in what the caller left
// out: the mode, the inputs of the start form (validated, or copied for a
// graph without one), and fresh run, task and workflow ids.
func prepareInput(g *Graph, in *RunInput) error {
	if in.Mode == "" {
		in.Mode = ModeWorkflow
	}
	resume := in.Resume
	if resume != nil && (resume.Snapshot == nil || in.RunID == "") {
		return fmt.Errorf("workflow: resuming needs the run id and its snapshot")
	}
	if resume == nil && g.root.kind != apps.NodeStart {
		// A graph entered elsewhere (a knowledge pipeline) has no input form.
		in.Inputs = maps.Clone(in.Inputs)
		if in.Inputs == nil {
			in.Inputs = map[string]any{}
		}
	} else if resume == nil {
		inputs, err := validateInputs(g.root, in.Inputs)
		if err != nil {
			return err
		}
		in.Inputs = inputs
	}
	if in.RunID == "" {
		in.RunID = models.NewID()
	}
	if in.TaskID == "" {
		in.TaskID = uuid.NewString()
	}
	if in.WorkflowID == "" {
		in.WorkflowID = uuid.NewString()
	}
	return nil
}

// Run executes a graph, calling emit for every event in order (emit may
// be nil). It returns an error only when the run cannot start (no graph,
// invalid inputs: an *apperr.Error with code invalid_param); how the run
// itself ended is in the Result and the workflow_finished event.
func (e *Engine) Run(ctx context.Context, in RunInput, emit func(Event)) (*Result, error) {
	g := in.Graph
	if g == nil {
		var err error
		if g, err = Compile(in.Workflow); err != nil {
			return nil, err
		}
	}
	resume := in.Resume
	if err := prepareInput(g, &in); err != nil {
		return nil, err
	}
	r := &run{
		e: e, g: g, in: in, pool: NewPool(), start: time.Now(), emitFn: emit,
		streamed: map[string]bool{}, convVars: map[string]bool{},
		env: Envelope{TaskID: in.TaskID, WorkflowRunID: in.RunID, MessageID: in.MessageID, ConversationID: in.ConversationID},
	}
	r.fillPool()
	createdAt, elapsedBefore, reason := r.start.Unix(), 0.0, "initial"
	if resume != nil {
		snap := resume.Snapshot
		r.pool.restore(snap.Variables)
		r.steps.Store(snap.Steps)
		r.exceptions.Store(snap.Exceptions)
		r.answer.WriteString(snap.Answer)
		maps.Copy(r.streamed, snap.Streamed)
		createdAt, elapsedBefore, reason = snap.CreatedAt, snap.Elapsed, "resumption"
	}

	record := &RunRecord{ID: in.RunID, TaskID: in.TaskID, WorkflowID: in.WorkflowID, AppID: in.AppID, UserID: in.UserID,
		ConversationID: in.ConversationID, MessageID: in.MessageID, Inputs: in.Inputs, CreatedAt: createdAt}
	var storeErr error
	if e.Store != nil {
		// Recorded even when the run is stopped at once, so it ends as
		// stopped; and before workflow_started goes out, so that a client
		// can look the run up (on any replica) as soon as it has its id.
		if resume != nil {
			storeErr = e.Store.RunResumed(context.WithoutCancel(ctx), record)
		} else {
			storeErr = e.Store.RunStarted(context.WithoutCancel(ctx), record)
		}
	}
	r.emit(&WorkflowStarted{Envelope: r.envelope(EventWorkflowStarted), Data: WorkflowStartedData{
		ID: in.RunID, WorkflowID: in.WorkflowID, Inputs: publicInputs(in.Inputs), CreatedAt: createdAt, Reason: reason,
	}})

	res := &Result{RunID: in.RunID, TaskID: in.TaskID, WorkflowID: in.WorkflowID}
	if storeErr != nil {
		res.Status, res.Error = RunFailed, "The run could not be recorded: "+storeErr.Error()
	} else {
		r.schedule(ctx, res)
	}
	res.ElapsedTime = elapsedBefore + time.Since(r.start).Seconds()
	res.Error = r.pool.Redact(res.Error)
	res.ConversationVariables = r.pool.Scope(ScopeConversation)
	if in.Mode == ModeChatflow {
		r.mu.Lock()
		res.Answer = r.answer.String()
		r.mu.Unlock()
		if res.Outputs == nil {
			res.Outputs = map[string]any{"answer": res.Answer}
		}
	}
	if res.Status == RunSucceeded && res.ExceptionsCount > 0 {
		res.Status = RunPartialSucceeded
	}
	var errp *string
	if res.Error != "" {
		errp = &res.Error
	}
	outputs := res.Outputs
	if outputs == nil {
		outputs = map[string]any{}
	}
	var end Event
	if res.Status == RunPaused {
		res.Snapshot.Elapsed, res.Snapshot.CreatedAt = res.ElapsedTime, createdAt
		end = res.PausedEvent(r.envelope(EventWorkflowPaused), createdAt)
	} else {
		end = &WorkflowFinished{Envelope: r.envelope(EventWorkflowFinished), Data: WorkflowFinishedData{
			ID: in.RunID, WorkflowID: in.WorkflowID, Status: res.Status, Outputs: plainMap(outputs), Error: errp,
			ElapsedTime: res.ElapsedTime, TotalTokens: res.TotalTokens, TotalSteps: res.TotalSteps,
			CreatedAt: createdAt, FinishedAt: time.Now().Unix(), ExceptionsCount: res.ExceptionsCount, Files: []any{},
		}}
	}
	// The end is recorded before the event that announces it, as the start
	// is: a client that reads the run (on any replica) as soon as it sees
	// workflow_finished must find it ended, and one that answers a form as
	// soon as it sees workflow_paused must find the run paused.
	if e.Store != nil && storeErr == nil {
		if err := e.Store.RunFinished(context.WithoutCancel(ctx), record, res); err != nil {
			e.logger().Error("workflow: recording the end of a run failed", "run", in.RunID, "err", err)
		}
	}
	r.emit(end)
	metrics.WorkflowRun(res.Status)
	return res, nil
}

// publicInputs hides nothing today but gives events their own map.
func publicInputs(in map[string]any) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = plain(v)
	}
	return out
}

func plainMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return plain(m).(map[string]any)
}

// fillPool sets the system, environment and conversation variables.
func (r *run) fillPool() {
	in := r.in
	files := make([]any, 0, len(in.Files))
	for _, f := range in.Files {
		f.Identity = FileIdentity
		files = append(files, f)
	}
	sys := map[string]any{
		"query": in.Query, "files": files, "user_id": in.UserID, "app_id": in.AppID,
		"workflow_id": in.WorkflowID, "workflow_run_id": in.RunID, "conversation_id": in.ConversationID,
		"dialogue_count": float64(in.DialogueCount), "timestamp": float64(r.start.Unix()),
	}
	if in.Mode != ModeChatflow {
		delete(sys, "query")
		delete(sys, "conversation_id")
		delete(sys, "dialogue_count")
	}
	r.pool.SetAll(ScopeSys, sys)
	for owner, vars := range in.PipelineVariables {
		r.pool.Set(ScopeRAG, owner, maps.Clone(vars))
	}
	w := r.g.workflow
	for _, v := range w.EnvironmentVariables {
		if v.ValueType == "secret" {
			r.pool.SetSecret(v.Name, Text(v.Value))
			continue
		}
		r.pool.Set(ScopeEnv, v.Name, coerce(v.ValueType, v.Value))
	}
	for _, v := range w.ConversationVariables {
		r.convVars[v.Name] = true
		val := coerce(v.ValueType, v.Value)
		if saved, ok := in.ConversationVariables[v.Name]; ok {
			val = saved
		}
		r.pool.Set(ScopeConversation, v.Name, val)
	}
}

// nodeState tracks a node during scheduling.
type nodeState int

const (
	statePending nodeState = iota
	stateRunning
	stateDone
	stateSkipped
	// statePaused is a human-input node waiting on its form.
	statePaused
)

// nodePaused is the finished status of a node that paused the run.
const nodePaused = "paused"

type edgeState int

const (
	edgeUnknown edgeState = iota
	edgeTaken
	edgeSkipped
)

// finished is the report a worker sends back to the scheduler.
type finished struct {
	node *gnode
	out  *outcome
	// status is succeeded, exception, failed or paused.
	status string
	err    error
}

// schedule runs the graph to its end and fills res.
func (r *run) schedule(parent context.Context, res *Result) {
	timeout := r.e.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	wr := r.walk(ctx, r.g)
	res.TotalSteps = int(r.steps.Load())
	res.TotalTokens = wr.tokens
	res.ExceptionsCount = int(r.exceptions.Load())
	fail := wr.fail
	switch {
	case parent.Err() != nil:
		res.Status, res.Error = RunStopped, "The run was stopped."
	case ctx.Err() != nil && fail == "" || errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Status, res.Error = RunFailed, fmt.Sprintf("The run took longer than %s and was stopped.", timeout)
	case fail != "":
		res.Status, res.Error = RunFailed, fail
	case len(wr.paused) > 0:
		res.Status, res.Snapshot, res.Forms = RunPaused, wr.snapshot, wr.forms
	default:
		res.Status = RunSucceeded
	}
	if wr.hasEnd {
		res.Outputs = wr.outputs
	}
}

// walkResult is how one pass over a graph ended.
type walkResult struct {
	// fail is the error that ended the pass early, "" when it completed.
	fail    string
	tokens  int
	outputs map[string]any
	hasEnd  bool
	// loopEnd is set when a loop-end node ran.
	loopEnd bool
	// paused names the human-input nodes that wait on forms, and forms
	// holds those forms; snapshot is the state to resume from.
	paused   []string
	forms    []*HumanForm
	snapshot *Snapshot
}

// walk runs g from its root until no node is left to run, or a node
// fails. It serves the top-level graph and, called from an iteration or a
// loop node, their inner graphs; steps and exceptions count for the whole
// run.
func (r *run) walk(parent context.Context, g *Graph) walkResult {
	e := r.e
	maxSteps := int64(e.MaxSteps)
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	par := e.Parallelism
	if par <= 0 {
		par = DefaultParallelism
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	nodes := make(map[*gnode]nodeState, len(g.nodes))
	edges := make([]edgeState, len(g.edges))
	var ready []*gnode
	running := 0
	results := make(chan finished)
	var wg sync.WaitGroup
	wr := walkResult{outputs: map[string]any{}}

	// settle marks the outgoing edges of a decided node and collects the
	// targets that became ready, skipping those no live branch reaches.
	var settle func(n *gnode, handle string, skipped bool)
	settle = func(n *gnode, handle string, skipped bool) {
		for _, ed := range n.out {
			if !skipped && ed.handle == handle {
				edges[ed.idx] = edgeTaken
			} else {
				edges[ed.idx] = edgeSkipped
			}
		}
		for _, ed := range n.out {
			t := g.byID[ed.target]
			if nodes[t] != statePending || slices.Contains(ready, t) {
				continue
			}
			taken, open := false, false
			for _, ie := range t.in {
				switch edges[ie.idx] {
				case edgeUnknown:
					open = true
				case edgeTaken:
					taken = true
				}
			}
			if open {
				continue
			}
			if taken {
				ready = append(ready, t)
			} else {
				nodes[t] = stateSkipped
				settle(t, "", true)
			}
		}
	}

	top := g == r.g
	if top && r.in.Resume != nil {
		ready = r.restore(g, nodes, edges, &wr)
	} else {
		ready = append(ready, g.root)
	}
	for {
		for wr.fail == "" && !wr.loopEnd && running < par && len(ready) > 0 {
			slices.SortFunc(ready, func(a, b *gnode) int { return a.order - b.order })
			n := ready[0]
			ready = ready[1:]
			index := r.steps.Add(1)
			if index > maxSteps {
				r.steps.Add(-1)
				wr.fail = fmt.Sprintf("The run stopped after %d steps, the most a run may take.", maxSteps)
				break
			}
			nodes[n] = stateRunning
			running++
			pred := predecessor(n, edges)
			wg.Add(1)
			go func(n *gnode, idx int) {
				defer wg.Done()
				results <- r.execute(ctx, n, idx, pred)
			}(n, int(index))
		}
		if running == 0 {
			break
		}
		f := <-results
		running--
		nodes[f.node] = stateDone
		if f.status == nodePaused {
			nodes[f.node] = statePaused
		}
		if handle, goOn := r.take(&wr, f, cancel); goOn {
			settle(f.node, handle, false)
		}
	}
	wg.Wait()
	if top && len(wr.paused) > 0 {
		wr.snapshot = r.snapshot(g, nodes, edges, wr)
	}
	return wr
}

// take adds what a finished node brings to the walk's result: a paused
// node its form, a failed one the walk's failure (the first cancels the
// rest), an end node the outputs. It returns the handle whose edges the
// walk goes on along, and false when the walk should not go on from it.
func (r *run) take(wr *walkResult, f finished, cancel context.CancelFunc) (string, bool) {
	if f.status == nodePaused {
		wr.paused = append(wr.paused, f.node.id)
		wr.forms = append(wr.forms, f.out.pause)
		return "", false
	}
	switch f.status {
	case NodeFailed:
		if wr.fail == "" {
			wr.fail = f.err.Error()
			cancel()
		}
		return "", false
	case NodeException:
		r.exceptions.Add(1)
	}
	wr.tokens += f.out.tokens
	switch f.node.kind {
	case apps.NodeEnd:
		wr.hasEnd = true
		for k, v := range f.out.outputs {
			wr.outputs[k] = v
		}
	case apps.NodeLoopEnd:
		wr.loopEnd = true
	}
	if wr.fail != "" || wr.loopEnd {
		return "", false
	}
	if f.out.handle == "" {
		return "source", true
	}
	return f.out.handle, true
}

// Names of node states in a Snapshot.
const (
	snapDone    = "done"
	snapSkipped = "skipped"
	snapPaused  = "paused"
)

// snapshot captures the state of a paused top-level pass.
func (r *run) snapshot(g *Graph, nodes map[*gnode]nodeState, edges []edgeState, wr walkResult) *Snapshot {
	snap := &Snapshot{
		Variables: r.pool.snapshot(), Nodes: map[string]string{}, Edges: make([]int, len(edges)),
		Paused: wr.paused, Steps: r.steps.Load(), Exceptions: r.exceptions.Load(),
		Tokens: wr.tokens, Outputs: plainMap(wr.outputs), HasEnd: wr.hasEnd,
	}
	for n, st := range nodes {
		switch st {
		case stateDone:
			snap.Nodes[n.id] = snapDone
		case stateSkipped:
			snap.Nodes[n.id] = snapSkipped
		case statePaused:
			snap.Nodes[n.id] = snapPaused
		}
	}
	for i, e := range edges {
		snap.Edges[i] = int(e)
	}
	r.mu.Lock()
	snap.Answer = r.answer.String()
	snap.Streamed = maps.Clone(r.streamed)
	r.mu.Unlock()
	return snap
}

// restore loads a paused pass's state into the scheduler's tables and
// returns the nodes to run first: the ones that paused.
func (r *run) restore(g *Graph, nodes map[*gnode]nodeState, edges []edgeState, wr *walkResult) []*gnode {
	snap := r.in.Resume.Snapshot
	var ready []*gnode
	for id, st := range snap.Nodes {
		n := g.byID[id]
		if n == nil {
			continue
		}
		switch st {
		case snapDone:
			nodes[n] = stateDone
		case snapSkipped:
			nodes[n] = stateSkipped
		case snapPaused:
			ready = append(ready, n)
		}
	}
	for i := range edges {
		if i < len(snap.Edges) {
			edges[i] = edgeState(snap.Edges[i])
		}
	}
	wr.tokens, wr.hasEnd = snap.Tokens, snap.HasEnd
	for k, v := range snap.Outputs {
		wr.outputs[k] = v
	}
	return ready
}

// predecessor is the source of the first taken edge into n.
func predecessor(n *gnode, edges []edgeState) *string {
	for _, ed := range n.in {
		if edges[ed.idx] == edgeTaken {
			s := ed.source
			return &s
		}
	}
	return nil
}
