-- A cache_versions counter for annotation reply settings, read before the
-- model on every chat message: it moves whenever an app's settings row is
-- written or removed (an app without a row has reply switched off).
INSERT INTO cache_versions (name, version) VALUES ('annotation_settings', 0);

CREATE TRIGGER cache_annotation_settings_insert AFTER INSERT ON annotation_reply_settings BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'annotation_settings';
END;
CREATE TRIGGER cache_annotation_settings_update AFTER UPDATE ON annotation_reply_settings BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'annotation_settings';
END;
CREATE TRIGGER cache_annotation_settings_delete AFTER DELETE ON annotation_reply_settings BEGIN
    UPDATE cache_versions SET version = version + 1 WHERE name = 'annotation_settings';
END;
