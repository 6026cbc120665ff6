-- Runs that pause for human input, and the forms they wait on.

-- The state a paused run resumes from (JSON); null for runs that are not
-- paused.
ALTER TABLE workflow_runs ADD COLUMN pause_state TEXT;

-- One form per human-input node a run reached. The token is what the form
-- operations are called with; definition holds what the form shows (JSON).
-- A form is answered once: status goes from waiting to submitted, or to
-- timeout when it expired and the run went on without it.
CREATE TABLE human_input_forms (
    id              TEXT PRIMARY KEY,
    token           TEXT NOT NULL UNIQUE,
    app_id          TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    workflow_run_id TEXT NOT NULL REFERENCES workflow_runs(id) ON DELETE CASCADE,
    node_id         TEXT NOT NULL,
    definition      TEXT NOT NULL,
    status          TEXT NOT NULL,
    action_id       TEXT,
    submitted_data  TEXT,
    submitted_by    TEXT,
    expires_at      TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    submitted_at    TIMESTAMPTZ,
    UNIQUE (workflow_run_id, node_id)
);
CREATE INDEX human_input_forms_waiting ON human_input_forms(status, expires_at);
