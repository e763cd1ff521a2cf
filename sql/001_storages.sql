-- Storage backends (Nakadi's /storages): each event type's topic lives in one.
CREATE TABLE storages (
    id            text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 36),
    storage_type  text NOT NULL CHECK (storage_type IN ('postgres', 'kafka')),
    configuration jsonb NOT NULL DEFAULT '{}',
    is_default    boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- At most one default storage, checked at commit so one statement can move it.
ALTER TABLE storages ADD CONSTRAINT storages_one_default
    EXCLUDE (is_default WITH =) WHERE (is_default) DEFERRABLE INITIALLY DEFERRED;
