-- An inverted index of the stored keywords of chunks (segments.keywords):
-- one row per knowledge base, keyword and chunk (segments.seq), so that
-- keyword search reads the chunks of the query's keywords through the
-- primary key instead of expanding the keyword list of every chunk of the
-- knowledge base. Triggers keep it in step with segments in the
-- transaction of each change. A list that is not a JSON array contributes
-- nothing.
CREATE TABLE segment_keywords (
    dataset_id TEXT NOT NULL,
    keyword    TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    PRIMARY KEY (dataset_id, keyword, seq)
);
CREATE INDEX segment_keywords_seq ON segment_keywords (seq);

-- The keywords of a stored list, or none when it is not a JSON array.
CREATE FUNCTION segment_keyword_list(list TEXT) RETURNS SETOF TEXT LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    j jsonb;
BEGIN
    BEGIN
        j := list::jsonb;
    EXCEPTION WHEN others THEN
        RETURN;
    END;
    IF jsonb_typeof(j) <> 'array' THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT DISTINCT e FROM jsonb_array_elements_text(j) AS e WHERE e IS NOT NULL;
END;
$$;

INSERT INTO segment_keywords (dataset_id, keyword, seq)
    SELECT s.dataset_id, k, s.seq FROM segments AS s, segment_keyword_list(s.keywords) AS k
    ON CONFLICT DO NOTHING;

CREATE FUNCTION sync_segment_keywords() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM segment_keywords WHERE seq = OLD.seq;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO segment_keywords (dataset_id, keyword, seq)
            SELECT NEW.dataset_id, k, NEW.seq FROM segment_keyword_list(NEW.keywords) AS k
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER segment_keywords_insert AFTER INSERT ON segments
    FOR EACH ROW EXECUTE FUNCTION sync_segment_keywords();
CREATE TRIGGER segment_keywords_delete AFTER DELETE ON segments
    FOR EACH ROW EXECUTE FUNCTION sync_segment_keywords();
CREATE TRIGGER segment_keywords_update AFTER UPDATE OF keywords, dataset_id, seq ON segments
    FOR EACH ROW WHEN (OLD.keywords IS DISTINCT FROM NEW.keywords OR OLD.dataset_id IS DISTINCT FROM NEW.dataset_id OR OLD.seq IS DISTINCT FROM NEW.seq)
    EXECUTE FUNCTION sync_segment_keywords();
