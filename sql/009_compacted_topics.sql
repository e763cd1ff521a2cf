-- The topics of compacted event types keep their events whatever their age: -1, as
-- Kafka's retention.ms, which the expired-events purge leaves alone. Compaction keeps the
-- latest event of each key; deleting by age would lose it.
ALTER TABLE log_topics DROP CONSTRAINT log_topics_retention_ms_check;
ALTER TABLE log_topics ADD CONSTRAINT log_topics_retention_ms_check
    CHECK (retention_ms > 0 OR retention_ms = -1);

-- Topics of compacted event types made before kept their retention time.
UPDATE log_topics SET retention_ms = -1
WHERE name IN (SELECT t.topic FROM timelines t JOIN event_types e ON e.name = t.event_type
               WHERE e.document->>'cleanup_policy' = 'compact');
