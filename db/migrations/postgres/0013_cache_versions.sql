-- Counters that tell in-memory caches when what they hold may be stale.
-- Triggers bump a counter whenever a row its cache is built from changes,
-- on whichever replica the change was made; a cache reads its counter
-- before trusting what it holds, so every replica sees a change at once.
CREATE TABLE cache_versions (
    name    TEXT PRIMARY KEY,
    version BIGINT NOT NULL DEFAULT 0
);
INSERT INTO cache_versions (name, version) VALUES ('api_keys', 0), ('apps', 0);

-- One trigger function for every counter; its argument names the counter.
CREATE FUNCTION bump_cache_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = TG_ARGV[0];
    RETURN NULL;
END;
$$;

CREATE TRIGGER cache_api_keys_update AFTER UPDATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('api_keys');
CREATE TRIGGER cache_api_keys_delete AFTER DELETE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('api_keys');
CREATE TRIGGER cache_api_key_datasets_insert AFTER INSERT ON api_key_datasets
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('api_keys');
CREATE TRIGGER cache_api_key_datasets_update AFTER UPDATE ON api_key_datasets
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('api_keys');
CREATE TRIGGER cache_api_key_datasets_delete AFTER DELETE ON api_key_datasets
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('api_keys');
CREATE TRIGGER cache_apps_update AFTER UPDATE ON apps
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('apps');
CREATE TRIGGER cache_apps_delete AFTER DELETE ON apps
    FOR EACH STATEMENT EXECUTE FUNCTION bump_cache_version('apps');
