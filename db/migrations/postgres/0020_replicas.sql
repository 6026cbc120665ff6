-- Replicas and the owner of running work (see the SQLite migration of the
-- same number for why).
CREATE TABLE replicas (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL DEFAULT '',
    started_at   TIMESTAMPTZ NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX replicas_heartbeat ON replicas(heartbeat_at);

ALTER TABLE indexing_jobs ADD COLUMN replica_id TEXT;
ALTER TABLE annotation_reply_jobs ADD COLUMN replica_id TEXT;
ALTER TABLE workflow_runs ADD COLUMN replica_id TEXT;
ALTER TABLE messages ADD COLUMN replica_id TEXT;

CREATE INDEX workflow_runs_running ON workflow_runs(replica_id) WHERE status = 'running';
