-- Event types as the API describes them (the EventType object, with its
-- current schema), and every schema version they ever had.
CREATE TABLE event_types (
    name       text PRIMARY KEY,
    document   jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE event_type_schemas (
    event_type text NOT NULL REFERENCES event_types (name) ON DELETE CASCADE,
    major      integer NOT NULL,
    minor      integer NOT NULL,
    patch      integer NOT NULL,
    document   jsonb NOT NULL,
    PRIMARY KEY (event_type, major, minor, patch)
);

-- Where an event type's events live: one storage topic per timeline. The
-- active timeline is the one with the highest order.
CREATE TABLE timelines (
    id             uuid PRIMARY KEY,
    event_type     text NOT NULL REFERENCES event_types (name) ON DELETE CASCADE,
    timeline_order integer NOT NULL CHECK (timeline_order BETWEEN 1 AND 9999),
    storage_id     text NOT NULL REFERENCES storages (id),
    topic          text NOT NULL,
    partitions     integer NOT NULL CHECK (partitions > 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    switched_at    timestamptz,
    UNIQUE (event_type, timeline_order)
);
