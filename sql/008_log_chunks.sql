-- The postgres engine's events in chunks: one row per partition of each
-- appending transaction (up to a bounded size), holding consecutive offsets.
-- A row per event cost the server a heap tuple, an index entry and a protocol
-- row for every event read or written; a chunk costs them once per batch.
--
-- `payloads` is the events' JSON, one per line: publishing stores compact JSON,
-- which never holds a line break. Stored uncompressed (EXTERNAL), as the events
-- were: streams read them far more often than they are written.
CREATE TABLE log_chunks (
    topic_id     bigint NOT NULL,
    partition    integer NOT NULL,
    first_offset bigint NOT NULL,
    -- At most 1,000 events (CHUNK_EVENTS): readers bound their index ranges by it.
    last_offset  bigint NOT NULL CHECK (last_offset - first_offset BETWEEN 0 AND 999),
    appended_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    payloads     text NOT NULL,
    PRIMARY KEY (topic_id, partition, last_offset)
);
ALTER TABLE log_chunks ALTER COLUMN payloads SET STORAGE EXTERNAL;

-- Events stored before become chunks of one event each, offsets unchanged (a
-- line break in JSON can only be whitespace between tokens: a space says the same).
LOCK TABLE log_events IN ACCESS EXCLUSIVE MODE;
INSERT INTO log_chunks (topic_id, partition, first_offset, last_offset, appended_at, payloads)
SELECT topic_id, partition, event_offset, event_offset, appended_at,
       replace(convert_from(payload, 'UTF8'), E'\n', ' ')
FROM log_events;
DROP TABLE log_events;
