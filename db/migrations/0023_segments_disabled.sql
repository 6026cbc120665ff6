-- The disabled chunks of a knowledge base, so that full-text search can
-- list them without reading every chunk row (see retrieval/fulltext.go).
CREATE INDEX segments_disabled ON segments(dataset_id, seq) WHERE NOT enabled;
