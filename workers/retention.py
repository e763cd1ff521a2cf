"""Removes events past their topic's retention time from the ``postgres`` engines.

Every worker process runs the loop; a PostgreSQL advisory lock lets only one
of them, across all instances, purge at a time. Kafka enforces retention itself.
"""

from __future__ import annotations

import gevent

from app.repository.storages import list_storages
from app.services import Services
from workers.periodic import run_every

LOCK_KEY = 0x6E616B6172  # shared by every instance of the broker


def purge_once(services: Services) -> int:
    """Purge every postgres storage if no other process is doing it; returns events removed."""
    removed = 0
    with services.pool.connection() as conn, conn.cursor() as cursor:
        conn.autocommit = True
        try:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,))
            [(locked,)] = cursor.fetchall()
            if not locked:
                return 0
            try:
                for storage in list_storages(services.pool):
                    if storage.storage_type == "postgres":
                        removed += services.engines.get(storage.id).purge_expired()
            finally:
                cursor.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
        finally:
            conn.autocommit = False
    return removed


def start_retention(services: Services) -> gevent.Greenlet:
    """Purge every ``retention_check_interval_s`` seconds, forever."""
    return run_every(services.settings.retention_check_interval_s,
                     lambda: purge_once(services), "expired events removed")
