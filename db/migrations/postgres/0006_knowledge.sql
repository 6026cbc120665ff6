-- Knowledge bases ("datasets" in the API), their tags and their custom
-- metadata fields. Tables added later for documents, chunks and index entries
-- point at datasets(id) with ON DELETE CASCADE, so that deleting a knowledge
-- base takes everything that belongs to it along.

CREATE TABLE datasets (
    id                       TEXT PRIMARY KEY,
    -- Names are unique in the workspace and compared exactly (case matters).
    name                     TEXT NOT NULL UNIQUE,
    description              TEXT NOT NULL DEFAULT '',
    provider                 TEXT NOT NULL DEFAULT 'vendor' CHECK (provider IN ('vendor', 'external')),
    permission               TEXT NOT NULL DEFAULT 'only_me'
                             CHECK (permission IN ('only_me', 'all_team_members', 'partial_members')),
    -- JSON array of the account ids given for partial_members.
    partial_members          TEXT NOT NULL DEFAULT '[]',
    -- NULL until chosen, either at creation or by the first document.
    indexing_technique       TEXT CHECK (indexing_technique IN ('high_quality', 'economy')),
    embedding_model          TEXT NOT NULL,
    embedding_model_provider TEXT NOT NULL,
    -- JSON of the search settings as last given; NULL means the defaults.
    retrieval_model          TEXT,
    -- JSON of the summary index settings; NULL when never given.
    summary_index_setting    TEXT,
    -- Chunk layout and source of the documents; NULL while there are none.
    doc_form                 TEXT,
    data_source_type         TEXT,
    built_in_field_enabled   BOOLEAN NOT NULL DEFAULT FALSE,
    -- The API key that made or last changed the knowledge base.
    created_by               TEXT NOT NULL DEFAULT '',
    updated_by               TEXT NOT NULL DEFAULT '',
    created_at               TIMESTAMPTZ NOT NULL,
    updated_at               TIMESTAMPTZ NOT NULL
);
CREATE INDEX datasets_created ON datasets(created_at DESC, id);

-- Tags group knowledge bases; they belong to the workspace, not to one base.
CREATE TABLE dataset_tags (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_by TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE dataset_tag_bindings (
    tag_id     TEXT NOT NULL REFERENCES dataset_tags(id) ON DELETE CASCADE,
    dataset_id TEXT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tag_id, dataset_id)
);
CREATE INDEX dataset_tag_bindings_dataset ON dataset_tag_bindings(dataset_id);

-- Custom metadata fields that documents of one knowledge base may carry.
-- Their values live with the documents and follow a field's deletion.
CREATE TABLE dataset_metadata_fields (
    id         TEXT PRIMARY KEY,
    dataset_id TEXT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    type       TEXT NOT NULL CHECK (type IN ('string', 'number', 'time')),
    created_by TEXT NOT NULL DEFAULT '',
    updated_by TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    UNIQUE (dataset_id, name)
);
