-- Messages whose answer is still being written. A streamed message is stored
-- when its stream starts and finished when the answer is complete; a row
-- still marked here at start-up was cut off by a crash and is closed as an
-- error.
ALTER TABLE messages ADD COLUMN generating INTEGER NOT NULL DEFAULT 0;
CREATE INDEX messages_generating ON messages(generating) WHERE generating = 1;
