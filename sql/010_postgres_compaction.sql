-- The postgres engine compacts the topics of compacted event types: an event that a
-- newer one of the same metadata.partition_compaction_key replaced becomes an empty
-- line of its chunk, so the offsets of the others stay (PostgresEngine.compact).
ALTER TABLE log_topics ADD COLUMN compacted boolean NOT NULL DEFAULT false;
UPDATE log_topics SET compacted = true
WHERE name IN (SELECT t.topic FROM timelines t JOIN event_types e ON e.name = t.event_type
               WHERE e.document->>'cleanup_policy' = 'compact');

-- How far each partition was compacted, and when: a partition is compacted again once
-- events came after that offset, at most once per NAKADI_COMPACTION_INTERVAL_S.
CREATE TABLE log_compactions (
    topic_id      bigint NOT NULL REFERENCES log_topics (id) ON DELETE CASCADE,
    partition     integer NOT NULL,
    compacted_to  bigint NOT NULL,
    compacted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, partition)
);
