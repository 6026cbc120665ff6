-- The events of workflow runs, kept while the database is shared by
-- several replicas (PostgreSQL), so that a client connected to one replica
-- can follow a run executing on another. SQLite serves one process, which
-- follows runs from memory and writes nothing here; the table exists so
-- both engines have the same schema.
--
-- A run has one segment per stretch of execution (its start, then each
-- resumption after human input), numbered from 1. Within a segment, seq 0
-- marks its start and the events follow from seq 1 in order; a row with a
-- null event marks the segment's end. Rows of finished runs are pruned.
CREATE TABLE run_events (
    run_id     TEXT NOT NULL,
    segment    INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    event      TEXT,
    created_at DATETIME NOT NULL,
    PRIMARY KEY (run_id, segment, seq)
);
CREATE INDEX run_events_created ON run_events(created_at);
