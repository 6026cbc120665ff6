-- Apps imported from app definition files, and the API keys that open them.
CREATE TABLE apps (
    id              TEXT PRIMARY KEY,
    name            TEXT NOT NULL,
    mode            TEXT NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    icon_type       TEXT NOT NULL DEFAULT '',
    icon            TEXT NOT NULL DEFAULT '',
    icon_background TEXT NOT NULL DEFAULT '',
    definition      TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('app', 'knowledge')),
    prefix       TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    app_id       TEXT REFERENCES apps(id) ON DELETE CASCADE,
    label        TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL,
    revoked_at   TIMESTAMPTZ,
    CHECK ((kind = 'app') = (app_id IS NOT NULL))
);
CREATE INDEX api_keys_prefix ON api_keys(prefix);

-- The knowledge bases a scoped knowledge key may use; none means workspace-wide.
CREATE TABLE api_key_datasets (
    api_key_id TEXT NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
    dataset_id TEXT NOT NULL,
    PRIMARY KEY (api_key_id, dataset_id)
);
