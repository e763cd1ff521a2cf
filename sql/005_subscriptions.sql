-- Subscriptions: a consumer group's server-managed reading of event types.
-- A subscription is identified by its key (owning application, the set of
-- event types, consumer group). key_digest is the SHA-256 of that key in a
-- canonical form (event types sorted), computed by the application: a unique
-- index on the columns themselves could outgrow a btree entry (a hundred
-- long event type names), a digest cannot.
CREATE TABLE subscriptions (
    id                 uuid PRIMARY KEY,
    owning_application text NOT NULL CHECK (owning_application <> ''),
    event_types        text[] NOT NULL CHECK (cardinality(event_types) > 0),  -- sorted
    consumer_group     text NOT NULL CHECK (consumer_group <> ''),
    read_from          text NOT NULL CHECK (read_from IN ('begin', 'end', 'cursors')),
    initial_cursors    jsonb NOT NULL DEFAULT '[]',
    "authorization"    jsonb,  -- quoted: a reserved word in SQL
    key_digest         text NOT NULL UNIQUE,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- Listing filters by event types with containment (event_types @> ARRAY[...]).
CREATE INDEX subscriptions_event_types ON subscriptions USING gin (event_types);
-- Listing is newest first, optionally for one owning application.
CREATE INDEX subscriptions_owner_created ON subscriptions (owning_application, created_at DESC, id DESC);
CREATE INDEX subscriptions_created ON subscriptions (created_at DESC, id DESC);
