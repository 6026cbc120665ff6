// Package cluster lets several appkb processes (replicas) that share one
// PostgreSQL database act as one server.
//
// The Bus carries small messages between replicas: a stop request that
// must reach the replica running a task, a note that a run wrote new
// events. A message is a topic and a short payload (ids, not data; the data
// stays in tables). Every subscriber of the topic receives it, on every
// replica, the publisher's own included, so code that reacts to a message
// does not need a separate path for "it was me".
//
// NewBus picks the implementation from the database: on PostgreSQL,
// messages go through NOTIFY and a dedicated connection LISTENs; on SQLite,
// where one process owns the data directory, they stay in the process.
// Delivery is best effort on both: a subscriber that does not keep up loses
// messages, and on PostgreSQL so does a replica while its listening
// connection is being re-established. Whatever must not be lost lives in
// the database and is also found by polling; the bus only makes it quick.
//
// The Replica registry says which processes are alive: each serving
// process keeps a row in the replicas table fresh with a heartbeat. Work a
// replica takes on (indexing and annotation jobs, workflow runs, streamed
// answers) carries its id, so that work of a replica whose heartbeat went
// stale can be taken over or closed by the others, and a replica that
// starts never touches the live work of another.
package cluster
