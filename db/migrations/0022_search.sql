-- PostgreSQL keeps a per knowledge base and model counter of vector
-- changes (embedding_versions) for the in-process vector cache. SQLite
-- reads the same facts from rowids (see retrieval/cache.go), so there is
-- nothing to create here; the file keeps both histories numbered alike.
SELECT 1;
