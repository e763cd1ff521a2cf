"""The ``storages`` table: which storage backends exist and which is the default."""

from __future__ import annotations

import json
from dataclasses import dataclass

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
