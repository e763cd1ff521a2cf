"""Timeline switches and the clean-up of closed timelines, in the ``timelines`` table."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from app.domain.timeline import Timeline
from app.repository.database import ConnectionPool
from app.repository.event_types import NOTIFY_CHANGE, TIMELINE_COLUMNS, timeline_from_row

# A switch reads the old timeline's ends and records them under this lock, taken
# exclusively; ``recorded_end`` takes it shared. An advisory lock, not a row lock,
# so that checks cost no writes. 1953066341: an arbitrary class of keys, the
# event type's name hashed within it (a collision only makes a check wait).
LOCK_END = "SELECT pg_advisory_xact_lock(1953066341, hashtext(%s))"
LOCK_END_SHARED = "SELECT pg_advisory_xact_lock_shared(1953066341, hashtext(%s))"


class TimelineConflict(Exception):
    """The event type changed under the switch (deleted, or switched by someone else)."""


@dataclass(frozen=True)
class TimelineRecord:
    """A timeline with the times the API shows."""

    timeline: Timeline
    created_at: datetime
    switched_at: datetime | None
    cleaned_up_at: datetime | None


def list_timelines(pool: ConnectionPool, name: str) -> list[TimelineRecord]:
    """Every timeline of an event type, oldest first."""
    rows = pool.fetch_all(
        f"SELECT {TIMELINE_COLUMNS}, created_at, switched_at, cleaned_up_at FROM timelines"
        " WHERE event_type = %s ORDER BY timeline_order", (name,))
    return [TimelineRecord(timeline_from_row(row[:8]), *row[8:]) for row in rows]


def switch_timeline(pool: ConnectionPool, closing: Timeline,
                    last_offsets_of: Callable[[], tuple[int, ...]], storage_id: str,
                    topic: str) -> tuple[Timeline, tuple[int, ...]]:
    """Close the active timeline where ``last_offsets_of`` finds its partitions end and
    open the next one, in one transaction that tells every process (NOTIFY). Returns
    the new timeline and the recorded end. The ends are read under the event type's
    end lock, so an append that ``recorded_end`` found open is inside them."""
    opened = Timeline(str(uuid.uuid4()), closing.event_type, closing.order + 1, storage_id,
                      topic, closing.partitions)
    with pool.transaction() as cursor:
        cursor.execute(LOCK_END, (closing.event_type,))
        cursor.execute("SELECT 1 FROM event_types WHERE name = %s FOR UPDATE",
                       (closing.event_type,))
        if cursor.fetchone() is None:
            raise TimelineConflict(f"EventType '{closing.event_type}' was deleted meanwhile.")
        last_offsets = last_offsets_of()
        cursor.execute("UPDATE timelines SET last_offsets = %s WHERE id = %s"
                       " AND last_offsets IS NULL", (list(last_offsets), closing.id))
        if cursor.rowcount != 1:
            raise TimelineConflict(f"the timeline of '{closing.event_type}' was switched by "
                                   "another request meanwhile")
        cursor.execute(
            "INSERT INTO timelines (id, event_type, timeline_order, storage_id, topic,"
            " partitions, switched_at) VALUES (%s, %s, %s, %s, %s, %s, now())",
            (opened.id, opened.event_type, opened.order, storage_id, topic, opened.partitions))
        cursor.execute(NOTIFY_CHANGE, (closing.event_type,))
    return opened, last_offsets


def recorded_end(pool: ConnectionPool, timeline: Timeline) -> tuple[int, ...] | None:
    """The newest engine offset of each partition of the timeline as a switch recorded
    it; None while it is active (or gone with its event type). Waits for a switch
    that is reading the ends: an append that ended before this call is either inside
    the end returned, or in a timeline still open."""
    # Two statements in one query string: one implicit transaction holds the lock, and
    # the second statement's snapshot, taken once the lock is granted, sees what a
    # switch it waited for committed. One round trip (a transaction took three).
    with pool.statement() as cursor:
        cursor.execute(f"{LOCK_END_SHARED}; SELECT last_offsets FROM timelines WHERE id = %s",
                       (timeline.event_type, timeline.id))
        row = cursor.fetchone()
    return None if row is None or row[0] is None else tuple(row[0])


def clean_up_expired(pool: ConnectionPool, removal_delay_s: float) -> int:
    """Mark the closed timelines whose retention ended (the event type's retention
    time since the switch that closed them; never for the compact cleanup policy,
    whose topics keep a key's latest event whatever its age) as cleaned up, and schedule the removal
    of their topics ``removal_delay_s`` later; every process hears of it (NOTIFY)
    and stops reading them first. Returns how many timelines."""
    with pool.transaction() as cursor:
        cursor.execute(
            "WITH expired AS ("
            " UPDATE timelines t SET cleaned_up_at = now()"
            " FROM timelines n, event_types e"
            " WHERE n.event_type = t.event_type AND n.timeline_order = t.timeline_order + 1"
            " AND e.name = t.event_type AND t.last_offsets IS NOT NULL"
            " AND e.document->>'cleanup_policy' IS DISTINCT FROM 'compact'"
            " AND t.cleaned_up_at IS NULL AND n.switched_at + make_interval(secs =>"
            " (e.document->'options'->>'retention_time')::bigint / 1000.0) <= now()"
            " RETURNING t.storage_id, t.topic, t.event_type),"
            " scheduled AS (INSERT INTO topic_deletions (storage_id, topic, due_at)"
            " SELECT storage_id, topic, now() + make_interval(secs => %s) FROM expired"
            " ON CONFLICT DO NOTHING)"
            " SELECT event_type FROM expired", (removal_delay_s,))
        names = [name for (name,) in cursor.fetchall()]
        for name in set(names):
            cursor.execute(NOTIFY_CHANGE, (name,))
    return len(names)
