-- Whether compaction emptied lines of a chunk: readers split only such chunks into
-- events, and hand the others on whole (PostgresEngine._read_many). Chunks of topics
-- compacted before this column existed may have such lines.
ALTER TABLE log_chunks ADD COLUMN holes boolean NOT NULL DEFAULT false;
UPDATE log_chunks SET holes = true
WHERE topic_id IN (SELECT id FROM log_topics WHERE compacted);
