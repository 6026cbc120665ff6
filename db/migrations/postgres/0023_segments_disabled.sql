-- SQLite gets a partial index of disabled chunks for its two-step
-- full-text search (see retrieval/fulltext.go); PostgreSQL ranks with its
-- own index, so there is nothing to create here. The file keeps both
-- histories numbered alike.
SELECT 1;
