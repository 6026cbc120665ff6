-- A cache_versions counter for annotation reply settings (see the SQLite
-- migration of the same number).
INSERT INTO cache_versions (name, version) VALUES ('annotation_settings', 0);

CREATE TRIGGER cache_annotation_reply_settings_insert AFTER INSERT ON annotation_reply_settings
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('annotation_settings');
CREATE TRIGGER cache_annotation_reply_settings_update AFTER UPDATE ON annotation_reply_settings
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('annotation_settings');
CREATE TRIGGER cache_annotation_reply_settings_delete AFTER DELETE ON annotation_reply_settings
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('annotation_settings');
