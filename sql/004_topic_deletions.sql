-- Storage topics of deleted event types, until they are removed from their
-- storage. Recorded in the transaction that deletes the event type, so a worker
-- that dies before removing them leaves the work to the next sweep.
CREATE TABLE topic_deletions (
    storage_id text NOT NULL REFERENCES storages (id),
    topic      text NOT NULL,
    due_at     timestamptz NOT NULL,
    PRIMARY KEY (storage_id, topic)
);
