-- The bytes of uploads and document files, by key (see package blobs):
-- files/<upload id> and datasets/<dataset>/<document>, the paths they have
-- under a SQLite installation's data directory. Every replica reads them
-- here, so none needs a shared disk.
CREATE TABLE blobs (
    key        TEXT PRIMARY KEY,
    size       BIGINT NOT NULL,
    data       BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
