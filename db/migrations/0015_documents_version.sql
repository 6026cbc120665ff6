-- A cache_versions counter for the documents that searches may return: it
-- moves whenever a document is added or removed, or its dataset, switch,
-- archive flag or indexing status changes (progress counters do not).
INSERT INTO cache_versions (name, version) VALUES ('documents', 0);

CREATE TRIGGER cache_documents_insert AFTER INSERT ON documents BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'documents';
END;
CREATE TRIGGER cache_documents_update AFTER UPDATE OF dataset_id, enabled, archived, indexing_status ON documents BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'documents';
END;
CREATE TRIGGER cache_documents_delete AFTER DELETE ON documents BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'documents';
END;
