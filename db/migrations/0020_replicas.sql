-- Replicas: the processes serving one database. Each refreshes its
-- heartbeat every few seconds and deletes its row when it stops in order.
-- Work a replica is doing carries its id in replica_id, so that the work of
-- a replica whose heartbeat went stale (or whose row is gone) can be taken
-- over (queued jobs again) or closed (runs, streamed messages). With SQLite
-- there is one process; the table and columns exist all the same.
CREATE TABLE replicas (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL DEFAULT '',
    started_at   DATETIME NOT NULL,
    heartbeat_at DATETIME NOT NULL
);
CREATE INDEX replicas_heartbeat ON replicas(heartbeat_at);

ALTER TABLE indexing_jobs ADD COLUMN replica_id TEXT;
ALTER TABLE annotation_reply_jobs ADD COLUMN replica_id TEXT;
ALTER TABLE workflow_runs ADD COLUMN replica_id TEXT;
ALTER TABLE messages ADD COLUMN replica_id TEXT;

-- The sweeps look for unfinished runs by owner.
CREATE INDEX workflow_runs_running ON workflow_runs(replica_id) WHERE status = 'running';
