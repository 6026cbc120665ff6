-- On SQLite this migration switches full-text search to stemmed terms.
-- PostgreSQL has stemmed with the english configuration since 0007, so
-- there is nothing to change; the file keeps the two histories numbered
-- alike.
SELECT 1;
