-- A knowledge base may run a knowledge pipeline imported from a Dify
-- export (kind: rag_pipeline) instead of its built-in one. The file is
-- kept as imported; one per knowledge base, removed with it.
CREATE TABLE dataset_pipelines (
    dataset_id TEXT PRIMARY KEY REFERENCES datasets(id) ON DELETE CASCADE,
    name       TEXT NOT NULL DEFAULT '',
    dsl        TEXT NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
