-- Documents of knowledge bases, their chunks ("segments"), the child chunks
-- of parent-child documents, the vectors and full-text entries that make
-- chunks searchable, and the queue of documents waiting to be indexed.
-- Everything hangs off datasets(id) or documents(id) with ON DELETE CASCADE,
-- so deleting a knowledge base or a document removes all of it.

CREATE TABLE documents (
    id                     TEXT PRIMARY KEY,
    dataset_id             TEXT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
    -- 1-based place in the knowledge base's list, in order of creation.
    position               BIGINT NOT NULL,
    name                   TEXT NOT NULL,
    -- Like Dify, text documents are kept as an uploaded .txt file too.
    data_source_type       TEXT NOT NULL DEFAULT 'upload_file' CHECK (data_source_type IN ('upload_file', 'text')),
    -- The original file, kept under <data dir>/datasets/<dataset_id>/<id>.
    file_id                TEXT NOT NULL,
    file_name              TEXT NOT NULL,
    file_size              BIGINT NOT NULL DEFAULT 0,
    file_extension         TEXT NOT NULL DEFAULT '',
    file_mime_type         TEXT NOT NULL DEFAULT '',
    -- The text extracted from the file; NULL until parsed.
    content                TEXT,
    -- The resolved process rule as JSON (textsplit.ProcessRule).
    process_rule           TEXT NOT NULL,
    doc_form               TEXT NOT NULL DEFAULT 'text_model'
                           CHECK (doc_form IN ('text_model', 'hierarchical_model', 'qa_model')),
    doc_language           TEXT NOT NULL DEFAULT 'English',
    indexing_status        TEXT NOT NULL DEFAULT 'waiting'
                           CHECK (indexing_status IN ('waiting', 'parsing', 'cleaning', 'splitting', 'indexing',
                                                      'completed', 'error', 'paused')),
    error                  TEXT,
    enabled                BOOLEAN NOT NULL DEFAULT TRUE,
    disabled_at            TIMESTAMPTZ,
    disabled_by            TEXT,
    archived               BOOLEAN NOT NULL DEFAULT FALSE,
    archived_at            TIMESTAMPTZ,
    word_count             BIGINT NOT NULL DEFAULT 0,
    tokens                 BIGINT NOT NULL DEFAULT 0,
    completed_segments     BIGINT NOT NULL DEFAULT 0,
    total_segments         BIGINT NOT NULL DEFAULT 0,
    -- The batch id of the create or update call that last queued it.
    batch                  TEXT NOT NULL,
    -- Custom metadata values: a JSON object from field id to value text.
    -- Values of fields that no longer exist are ignored when read.
    doc_metadata           TEXT NOT NULL DEFAULT '{}',
    created_by             TEXT NOT NULL DEFAULT '',
    created_at             TIMESTAMPTZ NOT NULL,
    updated_at             TIMESTAMPTZ NOT NULL,
    processing_started_at  TIMESTAMPTZ,
    parsing_completed_at   TIMESTAMPTZ,
    cleaning_completed_at  TIMESTAMPTZ,
    splitting_completed_at TIMESTAMPTZ,
    completed_at           TIMESTAMPTZ,
    paused_at              TIMESTAMPTZ,
    stopped_at             TIMESTAMPTZ
);
CREATE INDEX documents_dataset ON documents(dataset_id, position);
CREATE INDEX documents_batch ON documents(dataset_id, batch);

-- Chunks. seq is the stable integer row id that the full-text index points
-- at; id is the public id.
CREATE TABLE segments (
    seq             BIGSERIAL PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    dataset_id      TEXT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
    document_id     TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    position        BIGINT NOT NULL,
    content         TEXT NOT NULL,
    -- The answer of a question/answer chunk; '' otherwise.
    answer          TEXT NOT NULL DEFAULT '',
    word_count      BIGINT NOT NULL DEFAULT 0,
    tokens          BIGINT NOT NULL DEFAULT 0,
    -- JSON array of keywords for keyword search.
    keywords        TEXT NOT NULL DEFAULT '[]',
    index_node_id   TEXT NOT NULL,
    index_node_hash TEXT NOT NULL,
    hit_count       BIGINT NOT NULL DEFAULT 0,
    enabled         BOOLEAN NOT NULL DEFAULT TRUE,
    disabled_at     TIMESTAMPTZ,
    disabled_by     TEXT,
    status          TEXT NOT NULL DEFAULT 'completed'
                    CHECK (status IN ('waiting', 'indexing', 'completed', 'error')),
    error           TEXT,
    created_by      TEXT NOT NULL DEFAULT '',
    updated_by      TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    indexing_at     TIMESTAMPTZ,
    completed_at    TIMESTAMPTZ
);
CREATE INDEX segments_document ON segments(document_id, position);
CREATE INDEX segments_dataset ON segments(dataset_id);

-- Child chunks of parent-child (hierarchical_model) documents.
CREATE TABLE child_chunks (
    seq             BIGSERIAL PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    segment_id      TEXT NOT NULL REFERENCES segments(id) ON DELETE CASCADE,
    document_id     TEXT NOT NULL,
    dataset_id      TEXT NOT NULL,
    position        BIGINT NOT NULL,
    content         TEXT NOT NULL,
    word_count      BIGINT NOT NULL DEFAULT 0,
    index_node_id   TEXT NOT NULL,
    index_node_hash TEXT NOT NULL,
    type            TEXT NOT NULL DEFAULT 'automatic' CHECK (type IN ('automatic', 'customized')),
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX child_chunks_segment ON child_chunks(segment_id, position);
CREATE INDEX child_chunks_dataset ON child_chunks(dataset_id);

-- Vectors of chunks (child_id NULL) and child chunks, per embedding model
-- ("provider/model"), as little-endian float32s.
CREATE TABLE segment_embeddings (
    node_id    TEXT NOT NULL,
    model      TEXT NOT NULL,
    dataset_id TEXT NOT NULL,
    segment_id TEXT NOT NULL REFERENCES segments(id) ON DELETE CASCADE,
    child_id   TEXT REFERENCES child_chunks(id) ON DELETE CASCADE,
    dims       BIGINT NOT NULL,
    vector     BYTEA NOT NULL,
    PRIMARY KEY (node_id, model)
);
CREATE INDEX segment_embeddings_dataset ON segment_embeddings(dataset_id, model);
CREATE INDEX segment_embeddings_segment ON segment_embeddings(segment_id);
CREATE INDEX segment_embeddings_child ON segment_embeddings(child_id);

-- Full-text search on PostgreSQL: a stored tsvector column per chunk table,
-- kept current by the database itself (a generated column), with a GIN
-- index. English stemming matches what the SQLite build does with Porter.
ALTER TABLE segments ADD COLUMN tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('english', content)) STORED;
CREATE INDEX segments_tsv ON segments USING GIN (tsv);
ALTER TABLE child_chunks ADD COLUMN tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('english', content)) STORED;
CREATE INDEX child_chunks_tsv ON child_chunks USING GIN (tsv);

-- Documents waiting for (queued) or in (running) indexing. A row is removed
-- when its document is done. generation grows each time the document is
-- queued again, so that a worker holding an older generation stops without
-- writing. Rows left 'running' by a crash are queued again at start.
CREATE TABLE indexing_jobs (
    document_id TEXT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    state       TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running')),
    generation  BIGINT NOT NULL DEFAULT 1,
    attempts    BIGINT NOT NULL DEFAULT 0,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX indexing_jobs_state ON indexing_jobs(state, created_at);
