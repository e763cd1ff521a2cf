-- The append-only log of the `postgres` storage engine.
CREATE TABLE log_topics (
    id           bigserial PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    partitions   integer NOT NULL CHECK (partitions > 0),
    retention_ms bigint NOT NULL CHECK (retention_ms > 0),
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- One row per partition. Appenders lock the row while they take offsets, so
-- offsets are gap-free and become visible in order.
CREATE TABLE log_partitions (
    topic_id    bigint NOT NULL REFERENCES log_topics (id) ON DELETE CASCADE,
    partition   integer NOT NULL,
    next_offset bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (topic_id, partition)
);

-- No foreign key: it would cost every append a lookup; topic deletion removes
-- the events itself.
CREATE TABLE log_events (
    topic_id     bigint NOT NULL,
    partition    integer NOT NULL,
    event_offset bigint NOT NULL,
    appended_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    payload      bytea NOT NULL,
    PRIMARY KEY (topic_id, partition, event_offset)
);
