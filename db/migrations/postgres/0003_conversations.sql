-- End users, conversations, messages and what hangs off them (feedback,
-- uploaded files, conversation variables, annotations).

-- An end user is the `user` string a client sends, scoped to one app.
CREATE TABLE end_users (
    id               TEXT PRIMARY KEY,
    app_id           TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    external_user_id TEXT NOT NULL,
    type             TEXT NOT NULL DEFAULT 'service-api',
    name             TEXT,
    is_anonymous     BOOLEAN NOT NULL DEFAULT FALSE,
    session_id       TEXT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    UNIQUE (app_id, external_user_id)
);

CREATE TABLE conversations (
    id             TEXT PRIMARY KEY,
    app_id         TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    end_user_id    TEXT NOT NULL REFERENCES end_users(id) ON DELETE CASCADE,
    mode           TEXT NOT NULL,
    name           TEXT NOT NULL DEFAULT '',
    inputs         TEXT NOT NULL DEFAULT '{}',
    introduction   TEXT NOT NULL DEFAULT '',
    status         TEXT NOT NULL DEFAULT 'normal',
    dialogue_count BIGINT NOT NULL DEFAULT 0,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX conversations_owner ON conversations(app_id, end_user_id, updated_at);

CREATE TABLE messages (
    id                        TEXT PRIMARY KEY,
    app_id                    TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    conversation_id           TEXT REFERENCES conversations(id) ON DELETE CASCADE,
    end_user_id               TEXT NOT NULL REFERENCES end_users(id) ON DELETE CASCADE,
    parent_message_id         TEXT,
    task_id                   TEXT NOT NULL,
    workflow_run_id           TEXT,
    query                     TEXT NOT NULL DEFAULT '',
    inputs                    TEXT NOT NULL DEFAULT '{}',
    answer                    TEXT NOT NULL DEFAULT '',
    message_tokens            BIGINT NOT NULL DEFAULT 0,
    answer_tokens             BIGINT NOT NULL DEFAULT 0,
    total_tokens              BIGINT NOT NULL DEFAULT 0,
    provider_response_latency DOUBLE PRECISION NOT NULL DEFAULT 0,
    total_price               TEXT,
    currency                  TEXT,
    status                    TEXT NOT NULL DEFAULT 'normal',
    error                     TEXT,
    message_files             TEXT NOT NULL DEFAULT '[]',
    retriever_resources       TEXT NOT NULL DEFAULT '[]',
    agent_thoughts            TEXT NOT NULL DEFAULT '[]',
    created_at                TIMESTAMPTZ NOT NULL,
    updated_at                TIMESTAMPTZ NOT NULL
);
CREATE INDEX messages_conversation ON messages(conversation_id, created_at);
CREATE INDEX messages_app ON messages(app_id, created_at);

CREATE TABLE message_feedbacks (
    id          TEXT PRIMARY KEY,
    app_id      TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    message_id  TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    end_user_id TEXT NOT NULL REFERENCES end_users(id) ON DELETE CASCADE,
    rating      TEXT NOT NULL CHECK (rating IN ('like', 'dislike')),
    content     TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    UNIQUE (message_id, end_user_id)
);
CREATE INDEX message_feedbacks_app ON message_feedbacks(app_id, created_at);

-- Uploaded files live under the data directory at storage_key, never under a
-- name the client chose.
CREATE TABLE upload_files (
    id          TEXT PRIMARY KEY,
    app_id      TEXT REFERENCES apps(id) ON DELETE CASCADE,
    end_user_id TEXT REFERENCES end_users(id) ON DELETE SET NULL,
    name        TEXT NOT NULL,
    size        BIGINT NOT NULL,
    extension   TEXT NOT NULL DEFAULT '',
    mime_type   TEXT NOT NULL DEFAULT '',
    storage_key TEXT NOT NULL,
    hash        TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE conversation_variables (
    id              TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    value_type      TEXT NOT NULL,
    value           TEXT NOT NULL DEFAULT 'null',
    description     TEXT NOT NULL DEFAULT '',
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (conversation_id, id)
);

CREATE TABLE annotations (
    id            TEXT PRIMARY KEY,
    app_id        TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    question      TEXT NOT NULL,
    answer        TEXT NOT NULL,
    hit_count     BIGINT NOT NULL DEFAULT 0,
    embedding     BYTEA,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX annotations_app ON annotations(app_id, created_at);
