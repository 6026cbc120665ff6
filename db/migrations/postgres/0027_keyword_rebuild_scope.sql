-- The chunks a keyword rebuild must go through: those up to last_seq, the
-- newest chunk when the rebuild was recorded; chunks made after it already
-- have keywords of the current kind. The indexing-status endpoint reports
-- the documents whose chunks the rebuild has not reached yet as being
-- indexed, with its progress (internal/knowledge/documents/status.go).
-- NULL (a database that had no chunks then) bounds nothing.
ALTER TABLE keyword_rebuilds ADD COLUMN last_seq BIGINT;
UPDATE keyword_rebuilds SET last_seq = (SELECT MAX(seq) FROM segments) WHERE NOT done;
