-- A cache_versions counter for the documents that searches may return (see
-- the SQLite migration of the same number).
INSERT INTO cache_versions (name, version) VALUES ('documents', 0);

CREATE TRIGGER cache_documents_insert AFTER INSERT ON documents
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('documents');
CREATE TRIGGER cache_documents_update AFTER UPDATE OF dataset_id, enabled, archived, indexing_status ON documents
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('documents');
CREATE TRIGGER cache_documents_delete AFTER DELETE ON documents
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('documents');
