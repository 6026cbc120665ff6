-- Counters that tell in-memory caches when what they hold may be stale.
-- Triggers bump a counter whenever a row its cache is built from changes,
-- whichever process or connection made the change; a cache reads its
-- counter (one primary-key lookup) before trusting what it holds.
CREATE TABLE cache_versions (
    name    TEXT PRIMARY KEY,
    version INTEGER NOT NULL DEFAULT 0
);
INSERT INTO cache_versions (name, version) VALUES ('api_keys', 0), ('apps', 0);

CREATE TRIGGER cache_api_keys_update AFTER UPDATE ON api_keys BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'api_keys';
END;
CREATE TRIGGER cache_api_keys_delete AFTER DELETE ON api_keys BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'api_keys';
END;
CREATE TRIGGER cache_api_key_datasets_insert AFTER INSERT ON api_key_datasets BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'api_keys';
END;
CREATE TRIGGER cache_api_key_datasets_update AFTER UPDATE ON api_key_datasets BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'api_keys';
END;
CREATE TRIGGER cache_api_key_datasets_delete AFTER DELETE ON api_key_datasets BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'api_keys';
END;

CREATE TRIGGER cache_apps_update AFTER UPDATE ON apps BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'apps';
END;
CREATE TRIGGER cache_apps_delete AFTER DELETE ON apps BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'apps';
END;
