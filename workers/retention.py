"""Removes events past their topic's retention time from the ``postgres`` engines.

Every worker process runs the loop; a PostgreSQL advisory lock lets only one
of them, across all instances, purge at a time. Kafka enforces retention itself.
"""

from __future__ import annotations

import logging

import gevent

from app.repository.storages import list_storages
from app.services import Services

LOCK_KEY = 0x6E616B6172  # shared by every instance of the broker

log = logging.getLogger(__name__)


def purge_once(services: Services) -> int:
    """Purge every postgres storage if no other process is doing it; returns events removed."""
    removed = 0
    with services.pool.connection() as conn, conn.cursor() as cursor:
        conn.autocommit = True
        try:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,))
            if not cursor.fetchone()[0]:
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


def run_retention(services: Services) -> None:
    """Purge forever, every ``retention_check_interval_s`` seconds."""
    while True:
        gevent.sleep(services.settings.retention_check_interval_s)
        try:
            removed = purge_once(services)
        except Exception:
            log.exception("retention purge failed; retrying next interval")
        else:
            if removed:
                log.info("retention removed %d expired events", removed)


def start_retention(services: Services) -> gevent.Greenlet:
    return gevent.spawn(run_retention, services)
