-- Messages whose answer is still being written (see the SQLite migration of
-- the same number for why).
ALTER TABLE messages ADD COLUMN generating BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX messages_generating ON messages(generating) WHERE generating;
