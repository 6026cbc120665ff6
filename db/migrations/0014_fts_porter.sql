-- Full-text search stems English words (Porter) on top of the unicode61
-- tokenizer, so "indexing" matches "indexed" and "indexes". The indexes are
-- external-content tables: recreating them and rebuilding from the chunk
-- tables is enough; the triggers that keep them current refer to them by
-- name and go on working.
DROP TABLE segments_fts;
CREATE VIRTUAL TABLE segments_fts USING fts5(
    content, content='segments', content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2');
INSERT INTO segments_fts(segments_fts) VALUES ('rebuild');

DROP TABLE child_chunks_fts;
CREATE VIRTUAL TABLE child_chunks_fts USING fts5(
    content, content='child_chunks', content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2');
INSERT INTO child_chunks_fts(child_chunks_fts) VALUES ('rebuild');
