-- A counter per knowledge base that moves whenever the text of one of its
-- chunks or child chunks may have changed for full-text search: a row
-- added or removed, or its content, enabled flag or place changed. Each
-- process keeps a ranking index of the chunk texts in memory (see
-- retrieval/textindex.go) and trusts it only while this counter is what it
-- was when the index was read. Hit counts and other columns that search
-- does not rank by leave it alone.
CREATE TABLE chunk_text_versions (
    dataset_id TEXT PRIMARY KEY,
    version    INTEGER NOT NULL DEFAULT 0
);

CREATE TRIGGER chunk_text_segments_insert AFTER INSERT ON segments BEGIN
    INSERT INTO chunk_text_versions (dataset_id, version) VALUES (NEW.dataset_id, 1)
        ON CONFLICT (dataset_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER chunk_text_segments_delete AFTER DELETE ON segments BEGIN
    INSERT INTO chunk_text_versions (dataset_id, version) VALUES (OLD.dataset_id, 1)
        ON CONFLICT (dataset_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER chunk_text_segments_update AFTER UPDATE OF content, enabled, document_id, dataset_id, seq ON segments BEGIN
    INSERT INTO chunk_text_versions (dataset_id, version) VALUES (OLD.dataset_id, 1)
        ON CONFLICT (dataset_id) DO UPDATE SET version = version + 1;
    INSERT INTO chunk_text_versions (dataset_id, version) SELECT NEW.dataset_id, 1 WHERE NEW.dataset_id <> OLD.dataset_id
        ON CONFLICT (dataset_id) DO UPDATE SET version = version + 1;
END;

CREATE TRIGGER chunk_text_children_insert AFTER INSERT ON child_chunks BEGIN
    INSERT INTO chunk_text_versions (dataset_id, version) VALUES (NEW.dataset_id, 1)
        ON CONFLICT (dataset_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER chunk_text_children_delete AFTER DELETE ON child_chunks BEGIN
    INSERT INTO chunk_text_versions (dataset_id, version) VALUES (OLD.dataset_id, 1)
        ON CONFLICT (dataset_id) DO UPDATE SET version = version + 1;
END;
CREATE TRIGGER chunk_text_children_update AFTER UPDATE OF content, segment_id, document_id, dataset_id, seq ON child_chunks BEGIN
    INSERT INTO chunk_text_versions (dataset_id, version) VALUES (OLD.dataset_id, 1)
        ON CONFLICT (dataset_id) DO UPDATE SET version = version + 1;
    INSERT INTO chunk_text_versions (dataset_id, version) SELECT NEW.dataset_id, 1 WHERE NEW.dataset_id <> OLD.dataset_id
        ON CONFLICT (dataset_id) DO UPDATE SET version = version + 1;
END;
