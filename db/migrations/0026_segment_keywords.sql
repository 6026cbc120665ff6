-- An inverted index of the stored keywords of chunks (segments.keywords):
-- one row per knowledge base, keyword and chunk (segments.seq), so that
-- keyword search reads the chunks of the query's keywords through the
-- primary key instead of expanding the keyword list of every chunk of the
-- knowledge base. Triggers keep it in step with segments in the
-- transaction of each change; deleting a document or a knowledge base
-- deletes its chunks, whose delete trigger clears their rows. A list that
-- is not valid JSON contributes nothing (it never matched before either).
CREATE TABLE segment_keywords (
    dataset_id TEXT NOT NULL,
    keyword    TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    PRIMARY KEY (dataset_id, keyword, seq)
) WITHOUT ROWID;

INSERT OR IGNORE INTO segment_keywords (dataset_id, keyword, seq)
    SELECT s.dataset_id, j.value, s.seq FROM segments AS s, json_each(CASE WHEN json_valid(s.keywords) THEN s.keywords ELSE '[]' END) AS j
    WHERE j.type = 'text';

CREATE TRIGGER segment_keywords_insert AFTER INSERT ON segments BEGIN
    INSERT OR IGNORE INTO segment_keywords (dataset_id, keyword, seq)
        SELECT NEW.dataset_id, j.value, NEW.seq FROM json_each(CASE WHEN json_valid(NEW.keywords) THEN NEW.keywords ELSE '[]' END) AS j
        WHERE j.type = 'text';
END;
CREATE TRIGGER segment_keywords_delete AFTER DELETE ON segments BEGIN
    DELETE FROM segment_keywords WHERE dataset_id = OLD.dataset_id AND seq = OLD.seq AND keyword IN
        (SELECT j.value FROM json_each(CASE WHEN json_valid(OLD.keywords) THEN OLD.keywords ELSE '[]' END) AS j WHERE j.type = 'text');
END;
CREATE TRIGGER segment_keywords_update AFTER UPDATE OF keywords, dataset_id, seq ON segments BEGIN
    DELETE FROM segment_keywords WHERE dataset_id = OLD.dataset_id AND seq = OLD.seq AND keyword IN
        (SELECT j.value FROM json_each(CASE WHEN json_valid(OLD.keywords) THEN OLD.keywords ELSE '[]' END) AS j WHERE j.type = 'text');
    INSERT OR IGNORE INTO segment_keywords (dataset_id, keyword, seq)
        SELECT NEW.dataset_id, j.value, NEW.seq FROM json_each(CASE WHEN json_valid(NEW.keywords) THEN NEW.keywords ELSE '[]' END) AS j
        WHERE j.type = 'text';
END;
