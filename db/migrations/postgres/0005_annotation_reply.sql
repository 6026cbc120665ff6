-- Annotation reply: the per-app switch with its embedding model and
-- threshold, the background jobs that flip it, question vectors per
-- embedding model, and a log of the replies given from annotations.

-- One row per app once annotation reply has been switched on or off through
-- the API. No row means the feature is off.
CREATE TABLE annotation_reply_settings (
    app_id                  TEXT PRIMARY KEY REFERENCES apps(id) ON DELETE CASCADE,
    enabled                 BOOLEAN NOT NULL DEFAULT FALSE,
    embedding_provider_name TEXT NOT NULL DEFAULT '',
    embedding_model_name    TEXT NOT NULL DEFAULT '',
    score_threshold         DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at              TIMESTAMPTZ NOT NULL,
    updated_at              TIMESTAMPTZ NOT NULL
);

-- A request to switch annotation reply on or off. Jobs run in the
-- background, one app's jobs in the order they were made; their state is
-- here so that polling works across restarts and unfinished jobs can be
-- picked up again.
CREATE TABLE annotation_reply_jobs (
    id                      TEXT PRIMARY KEY,
    app_id                  TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    action                  TEXT NOT NULL CHECK (action IN ('enable', 'disable')),
    status                  TEXT NOT NULL CHECK (status IN ('waiting', 'processing', 'completed', 'error')),
    error_msg               TEXT NOT NULL DEFAULT '',
    embedding_provider_name TEXT NOT NULL DEFAULT '',
    embedding_model_name    TEXT NOT NULL DEFAULT '',
    score_threshold         DOUBLE PRECISION NOT NULL DEFAULT 0,
    attempts                BIGINT NOT NULL DEFAULT 0,
    created_at              TIMESTAMPTZ NOT NULL,
    updated_at              TIMESTAMPTZ NOT NULL
);
CREATE INDEX annotation_reply_jobs_pending ON annotation_reply_jobs(status, app_id, created_at);

-- The embedding of an annotation's question under one embedding model,
-- stored as little-endian float32s scaled to unit length. Keeping the model
-- in the key lets a job embed with a new model while the old vectors still
-- serve replies.
CREATE TABLE annotation_embeddings (
    annotation_id           TEXT NOT NULL REFERENCES annotations(id) ON DELETE CASCADE,
    app_id                  TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    embedding_provider_name TEXT NOT NULL,
    embedding_model_name    TEXT NOT NULL,
    vector                  BYTEA NOT NULL,
    created_at              TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (annotation_id, embedding_provider_name, embedding_model_name)
);
CREATE INDEX annotation_embeddings_app ON annotation_embeddings(app_id, embedding_provider_name, embedding_model_name);

-- One row for every query that was answered from an annotation.
CREATE TABLE annotation_hit_histories (
    id                  TEXT PRIMARY KEY,
    app_id              TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    annotation_id       TEXT NOT NULL REFERENCES annotations(id) ON DELETE CASCADE,
    query               TEXT NOT NULL,
    score               DOUBLE PRECISION NOT NULL,
    annotation_question TEXT NOT NULL,
    annotation_answer   TEXT NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL
);
CREATE INDEX annotation_hit_histories_annotation ON annotation_hit_histories(annotation_id, created_at);
