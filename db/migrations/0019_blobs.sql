-- The bytes of uploads and document files, by key (see package blobs).
-- SQLite installations keep them in the data directory and leave this table
-- empty; it exists so both histories have the same tables and a copy to
-- PostgreSQL has somewhere to put the files.
CREATE TABLE blobs (
    key        TEXT PRIMARY KEY,
    size       BIGINT NOT NULL,
    data       BLOB NOT NULL,
    created_at DATETIME NOT NULL
);
