"""The ``storages`` table: which storage backends exist and which is the default."""

from __future__ import annotations

import json
from dataclasses import dataclass

import psycopg2.errors

from app.config import Settings
from app.repository.database import ConnectionPool


@dataclass(frozen=True)
class Storage:
    id: str
    storage_type: str
    configuration: dict
    is_default: bool


def _storage(row: tuple) -> Storage:
    return Storage(id=row[0], storage_type=row[1], configuration=row[2], is_default=row[3])


def list_storages(pool: ConnectionPool) -> list[Storage]:
    rows = pool.fetch_all(
        "SELECT id, storage_type, configuration, is_default FROM storages ORDER BY id")
    return [_storage(row) for row in rows]


def get_storage(pool: ConnectionPool, storage_id: str) -> Storage | None:
    rows = pool.fetch_all(
        "SELECT id, storage_type, configuration, is_default FROM storages WHERE id = %s",
        (storage_id,))
    return _storage(rows[0]) if rows else None


def register_local_storages(pool: ConnectionPool, settings: Settings) -> None:
    """Make sure the storages this deployment is configured with exist.

    ``postgres`` (the metadata database's own log) always does; ``kafka`` does when
    bootstrap servers are configured, and follows their address. The default is
    set only when none is, so a default chosen later through the API stays."""
    with pool.transaction() as cursor:
        cursor.execute(
            "INSERT INTO storages (id, storage_type) VALUES ('postgres', 'postgres')"
            " ON CONFLICT (id) DO NOTHING")
        if settings.kafka_bootstrap_servers:
            cursor.execute(
                "INSERT INTO storages (id, storage_type, configuration)"
                " VALUES ('kafka', 'kafka', %s)"
                " ON CONFLICT (id) DO UPDATE SET configuration = EXCLUDED.configuration",
                (json.dumps({"bootstrap_servers": settings.kafka_bootstrap_servers}),))
        cursor.execute("SELECT 1 FROM storages WHERE is_default")
        if cursor.fetchone() is None:
            cursor.execute("UPDATE storages SET is_default = true WHERE id = %s",
                           (settings.default_storage,))
            if cursor.rowcount != 1:
                raise ValueError(
                    f"NAKADI_DEFAULT_STORAGE={settings.default_storage!r} names no storage")


class StorageExists(Exception):
    """A storage of that id exists already."""


class StorageInUse(Exception):
    """Timelines (or pending topic removals) still use the storage; the message says which."""


def insert_storage(pool: ConnectionPool, storage: Storage) -> None:
    try:
        with pool.transaction() as cursor:
            cursor.execute(
                "INSERT INTO storages (id, storage_type, configuration) VALUES (%s, %s, %s)",
                (storage.id, storage.storage_type, json.dumps(storage.configuration)))
    except psycopg2.errors.UniqueViolation:
        raise StorageExists(storage.id) from None


def delete_storage(pool: ConnectionPool, storage_id: str) -> bool:
    """Delete a storage that nothing uses; False when there is none. ``StorageInUse``
    when it is the default or timelines of event types are on it."""
    with pool.transaction() as cursor:
        cursor.execute("SELECT is_default FROM storages WHERE id = %s FOR UPDATE",
                       (storage_id,))
        row = cursor.fetchone()
        if row is None:
            return False
        if row[0]:
            raise StorageInUse(f"storage '{storage_id}' is the default storage; make another "
                               "one the default first")
        cursor.execute("SELECT DISTINCT event_type FROM timelines WHERE storage_id = %s"
                       " ORDER BY event_type LIMIT 11", (storage_id,))
        users = [name for (name,) in cursor.fetchall()]
        if users:
            named = ", ".join(f"'{name}'" for name in users[:10])
            raise StorageInUse(f"storage '{storage_id}' holds timelines of event types {named}"
                               f"{' and more' if len(users) > 10 else ''}; move them to another "
                               "storage with a new timeline and wait for the old ones' "
                               "retention to end, or delete the event types")
        cursor.execute("SELECT 1 FROM topic_deletions WHERE storage_id = %s LIMIT 1",
                       (storage_id,))
        if cursor.fetchone() is not None:
            raise StorageInUse(f"topics of storage '{storage_id}' are still being removed; "
                               "try again in a minute")
        cursor.execute("DELETE FROM storages WHERE id = %s", (storage_id,))
    return True


def make_default(pool: ConnectionPool, storage_id: str) -> Storage | None:
    """Make the storage the default one (where new event types go); None when there is none."""
    with pool.transaction() as cursor:
        cursor.execute(
            "SELECT id, storage_type, configuration, is_default FROM storages WHERE id = %s"
            " FOR UPDATE", (storage_id,))
        row = cursor.fetchone()
        if row is None:
            return None
        cursor.execute("UPDATE storages SET is_default = (id = %s)"
                       " WHERE is_default OR id = %s", (storage_id, storage_id))
    return Storage(row[0], row[1], row[2], True)
