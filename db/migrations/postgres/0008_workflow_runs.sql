-- Workflow versions, runs and node executions.

-- A version is one definition text of a workflow or chatflow app. A row is
-- added the first time a run sees a definition it has not seen before (after
-- an import or a replace), so every run can name the exact graph it ran.
CREATE TABLE workflow_versions (
    id              TEXT PRIMARY KEY,
    app_id          TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    definition_hash TEXT NOT NULL,
    definition      TEXT NOT NULL,
    version         TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    UNIQUE (app_id, definition_hash)
);

CREATE TABLE workflow_runs (
    id               TEXT PRIMARY KEY,
    app_id           TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    workflow_id      TEXT NOT NULL REFERENCES workflow_versions(id) ON DELETE CASCADE,
    task_id          TEXT NOT NULL,
    end_user_id      TEXT REFERENCES end_users(id) ON DELETE SET NULL,
    triggered_from   TEXT NOT NULL DEFAULT 'app-run',
    created_from     TEXT NOT NULL DEFAULT 'service-api',
    conversation_id  TEXT,
    message_id       TEXT,
    status           TEXT NOT NULL,
    inputs           TEXT NOT NULL DEFAULT '{}',
    outputs          TEXT,
    error            TEXT,
    elapsed_time     DOUBLE PRECISION NOT NULL DEFAULT 0,
    total_tokens     BIGINT NOT NULL DEFAULT 0,
    total_steps      BIGINT NOT NULL DEFAULT 0,
    exceptions_count BIGINT NOT NULL DEFAULT 0,
    created_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ
);
CREATE INDEX workflow_runs_app ON workflow_runs(app_id, created_at);

CREATE TABLE workflow_node_executions (
    id                  TEXT PRIMARY KEY,
    workflow_run_id     TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    node_id             TEXT NOT NULL,
    node_type           TEXT NOT NULL,
    title               TEXT NOT NULL DEFAULT '',
    node_index          BIGINT NOT NULL,
    predecessor_node_id TEXT,
    inputs              TEXT NOT NULL DEFAULT '{}',
    process_data        TEXT,
    outputs             TEXT,
    status              TEXT NOT NULL,
    error               TEXT,
    elapsed_time        DOUBLE PRECISION NOT NULL DEFAULT 0,
    execution_metadata  TEXT NOT NULL DEFAULT '{}',
    created_at          TIMESTAMPTZ NOT NULL,
    finished_at         TIMESTAMPTZ
);
CREATE INDEX workflow_node_executions_run ON workflow_node_executions(workflow_run_id, node_index);
