-- Rebuilds of the stored keywords of chunks (segments.keywords) that a new
-- version of textsplit.Keywords calls for. Each row is one rebuild: the
-- indexing workers go through the chunks in seq order, a batch at a time,
-- recording the last seq done in next_seq so that a restart carries on
-- where it stopped, and set done at the end (internal/knowledge/documents/
-- rekeyword.go). 'cjk-words-1': Chinese and Japanese keywords became words
-- instead of pairs of characters.
CREATE TABLE keyword_rebuilds (
    name     TEXT PRIMARY KEY,
    next_seq BIGINT NOT NULL DEFAULT 0,
    done     BOOLEAN NOT NULL DEFAULT FALSE
);
INSERT INTO keyword_rebuilds (name) VALUES ('cjk-words-1');
