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
// # Limits
//
// A run stops with status "failed" when it executes more than
// Engine.MaxSteps nodes (default 500) or lasts longer than Engine.Timeout
// (default 10 minutes), or when its context is cancelled ("stopped").
package workflow
