"""Removes events past their topic's retention time from the storages that leave
it to the broker (``postgres``; Kafka enforces retention itself), the events a
newer one of the same key replaced from their compacted topics, and closed
timelines whose retention ended: they are marked cleaned up at once (readers
stop reading them within a poll) and their topics removed by the topic sweeps
``TIMELINE_TOPIC_DELAY_S`` later.

Every worker process runs the loop; a PostgreSQL advisory lock lets only one
of them, across all instances, purge at a time.
"""

from __future__ import annotations

import gevent

from app.repository.timelines import clean_up_expired
from app.services import Services
from workers.periodic import run_every

LOCK_KEY = 0x6E616B6172  # shared by every instance of the broker
TIMELINE_TOPIC_DELAY_S = 30.0


def purge_once(services: Services) -> int:
    """Purge and compact every storage if no other process is doing it; returns events
    removed."""
    removed = 0
    with services.pool.connection() as conn, conn.cursor() as cursor:
        conn.autocommit = True
        try:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,))
            [(locked,)] = cursor.fetchall()
            if not locked:
                return 0
            try:
                removed += clean_up_expired(services.pool, TIMELINE_TOPIC_DELAY_S)
                for engine in services.engines.all().values():
                    removed += engine.purge_expired()
                    removed += engine.compact(services.settings.compaction_interval_s)
            finally:
                cursor.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
        finally:
            conn.autocommit = False
    return removed


def start_retention(services: Services) -> gevent.Greenlet:
    """Purge every ``retention_check_interval_s`` seconds, forever."""
    return run_every(services.settings.retention_check_interval_s,
                     lambda: purge_once(services), "events removed (expired or compacted)")
