// Package workflow runs the graphs of workflow and advanced-chat (chatflow)
// apps: it builds a runnable graph from an apps.Workflow, keeps the variable
// pool of a run, executes the nodes and reports what happens as typed stream
// events. It knows nothing about HTTP, SSE framing or storage; the handlers
// turn the events into frames and a RunStore (see store.go) may persist them.
//
// # Scheduling
//
// A node becomes ready once every incoming edge is decided. An edge is
// decided when its source node has finished (the edge is taken when the
// node chose that edge's source handle, skipped otherwise) or was itself
// skipped. A ready node runs when at least one incoming edge was taken;
// when all were skipped the node is skipped too and its outgoing edges are
// skipped in turn, so a branch that was not chosen never blocks a join.
//
// Ready nodes run concurrently on a bounded pool of goroutines
// (Engine.Parallelism, default 4). With Parallelism 1 the engine runs one
// node at a time in a deterministic order: among ready nodes, the one that
// appears first in the file. Events are always delivered one at a time, in
// the order they happened, never concurrently.
//
// # Iterations and loops
//
// The nodes inside an iteration or a loop (parentId, or isInIteration /
// isInLoop with iteration_id / loop_id) form a graph of their own, built
// by Compile and kept on the container node. It begins at the container's
// start_node_id, or at its iteration-start / loop-start node, and runs with
// the same scheduler once per item or round; the outputs of the inner
// nodes are cleared between rounds. Inner node executions count towards
// Engine.MaxSteps. With is_parallel, up to parallel_nums rounds (at most
// 10) of an iteration run at once, each on its own copy of the variables;
// the conversation and loop variables a round changes are written back
// when it ends, and the outputs keep the order of the items. A loop stops
// after loop_count rounds, when its break conditions hold (checked before
// the first round and after each) or when a round reaches loop-end; its
// variables live under the loop's id and assigner nodes may write them.
//
// # HTTP requests
//
// http-request nodes send their requests through Engine.HTTPClient, or,
// when it is nil, through a client that dials only addresses
// Engine.HTTPGuard permits (checked after resolution and again on the
// socket), so a workflow cannot reach loopback, private or metadata
// addresses. ssl_verify is ignored: certificates are always verified.
// A binary response becomes a file that points back at the URL it came
// from, since the engine has no file store.
//
// # Code, tools and agents
//
// javascript code runs in-process with goja under Engine.CodeTimeout;
// python3 code runs through Engine.Python, a CodeRunner that isolates it
// in another process (package sandbox uses bubblewrap). Without one,
// python3 nodes fail; they never run unsandboxed. tool nodes run the tools
// Engine.Tools finds (package tools: the built-in set of docs/tools.md, and
// the MCP, OpenAPI and workflow tools of the tools file); a tool it cannot
// find fails the node and names it. Files tools make are kept in
// Engine.Files. agent nodes run the loop of package agent over their tools
// (and, for the MCP agent strategy, the tools of their MCP servers) on the
// engine's models.
// document-extractor nodes read uploads from Engine.Files and remote files
// through the guard below.
//
// # Human input
//
// A human-input node stores a form through Engine.Forms, announces it
// with human_input_required and pauses its branch; other branches run on
// until nothing is left to run, and the run ends with workflow_paused
// (status "paused") and a Snapshot in its Result: the variables (never the
// environment ones), the state of every node and edge, and the counters.
// Running the same RunInput again with Resume set to that snapshot and
// the run's forms continues where it stopped: workflow_started (reason
// "resumption"), then the answered node finishes with the form's values
// and follows the edge of the chosen action (or __timeout), and waiting
// nodes pause again. Human-input nodes may not sit inside iterations or
// loops.
//
// # Limits
//
// A run stops with status "failed" when it executes more than
// Engine.MaxSteps nodes (default 500) or lasts longer than Engine.Timeout
// (default 10 minutes), or when its context is cancelled ("stopped").
package workflow
