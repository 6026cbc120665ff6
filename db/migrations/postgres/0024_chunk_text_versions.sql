-- A counter per knowledge base that moves whenever the text of one of its
-- chunks or child chunks may have changed for full-text search: a row
-- added or removed, or its content, enabled flag or place changed. Each
-- replica keeps a ranking index of the chunk texts in memory (see
-- retrieval/textindex.go) and trusts it only while this counter is what it
-- was when the index was read, so a change made on any replica is seen by
-- the next search on every other. Hit counts and other columns that search
-- does not rank by leave it alone.
CREATE TABLE chunk_text_versions (
    dataset_id TEXT PRIMARY KEY,
    version    BIGINT NOT NULL DEFAULT 0
);

-- Inserts and deletes: one bump per knowledge base and statement, from the
-- statement's transition table (bulk inserts of chunks write many rows at
-- once).
CREATE FUNCTION bump_chunk_text_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_text_versions (dataset_id, version)
        SELECT DISTINCT dataset_id, 1 FROM changed_rows
    ON CONFLICT (dataset_id) DO UPDATE SET version = chunk_text_versions.version + 1;
    RETURN NULL;
END;
$$;

-- Updates: PostgreSQL allows no transition table on a trigger limited to
-- some columns, so these fire per row, and only when a ranked column
-- really changed.
CREATE FUNCTION bump_chunk_text_version_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_text_versions (dataset_id, version) VALUES (OLD.dataset_id, 1)
    ON CONFLICT (dataset_id) DO UPDATE SET version = chunk_text_versions.version + 1;
    IF NEW.dataset_id <> OLD.dataset_id THEN
        INSERT INTO chunk_text_versions (dataset_id, version) VALUES (NEW.dataset_id, 1)
        ON CONFLICT (dataset_id) DO UPDATE SET version = chunk_text_versions.version + 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER chunk_text_segments_insert AFTER INSERT ON segments
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_chunk_text_version();
CREATE TRIGGER chunk_text_segments_delete AFTER DELETE ON segments
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_chunk_text_version();
CREATE TRIGGER chunk_text_segments_update AFTER UPDATE OF content, enabled, document_id, dataset_id, seq ON segments
    FOR EACH ROW
    WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.enabled IS DISTINCT FROM NEW.enabled
        OR OLD.document_id IS DISTINCT FROM NEW.document_id OR OLD.dataset_id IS DISTINCT FROM NEW.dataset_id
        OR OLD.seq IS DISTINCT FROM NEW.seq)
    EXECUTE FUNCTION bump_chunk_text_version_row();

CREATE TRIGGER chunk_text_children_insert AFTER INSERT ON child_chunks
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_chunk_text_version();
CREATE TRIGGER chunk_text_children_delete AFTER DELETE ON child_chunks
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_chunk_text_version();
CREATE TRIGGER chunk_text_children_update AFTER UPDATE OF content, segment_id, document_id, dataset_id, seq ON child_chunks
    FOR EACH ROW
    WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.segment_id IS DISTINCT FROM NEW.segment_id
        OR OLD.document_id IS DISTINCT FROM NEW.document_id OR OLD.dataset_id IS DISTINCT FROM NEW.dataset_id
        OR OLD.seq IS DISTINCT FROM NEW.seq)
    EXECUTE FUNCTION bump_chunk_text_version_row();
