-- A counter per knowledge base and embedding model that moves whenever
-- one of its stored vectors is added, changed or removed. Each replica
-- keeps the vectors in memory for semantic search and reads this counter
-- (one primary-key lookup) before trusting them. PostgreSQL has no stable
-- rowid to derive that from as the SQLite build does.
CREATE TABLE embedding_versions (
    dataset_id TEXT NOT NULL,
    model      TEXT NOT NULL,
    version    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (dataset_id, model)
);

-- Statement-level triggers with transition tables: one bump per knowledge
-- base and model a statement touched, however many rows it wrote.
CREATE FUNCTION bump_embedding_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO embedding_versions (dataset_id, model, version)
        SELECT DISTINCT dataset_id, model, 1 FROM changed_rows
    ON CONFLICT (dataset_id, model) DO UPDATE SET version = embedding_versions.version + 1;
    RETURN NULL;
END;
$$;

CREATE TRIGGER embedding_versions_insert AFTER INSERT ON segment_embeddings
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_embedding_version();
CREATE TRIGGER embedding_versions_update AFTER UPDATE ON segment_embeddings
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_embedding_version();
CREATE TRIGGER embedding_versions_delete AFTER DELETE ON segment_embeddings
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION bump_embedding_version();
