"""Pending removals of storage topics: those of deleted event types and cleaned-up
timelines, and those no event type uses that a storage may still hold."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg2.extensions

from app.repository.database import ConnectionPool


def schedule(cursor: psycopg2.extensions.cursor, event_type: str, delay_s: float) -> None:
    """Record, in the caller's transaction, that the topics of every timeline of
    the event type are to be removed ``delay_s`` seconds from now (those of
    cleaned-up timelines are gone or already scheduled)."""
    cursor.execute(
        "INSERT INTO topic_deletions (storage_id, topic, due_at)"
        " SELECT storage_id, topic, now() + make_interval(secs => %s)"
        " FROM timelines WHERE event_type = %s AND cleaned_up_at IS NULL"
        " ON CONFLICT DO NOTHING",
        (delay_s, event_type))


def schedule_topic(pool: ConnectionPool, storage_id: str, topic: str, delay_s: float) -> None:
    """Record that one topic is to be removed ``delay_s`` seconds from now."""
    pool.execute(
        "INSERT INTO topic_deletions (storage_id, topic, due_at)"
        " VALUES (%s, %s, now() + make_interval(secs => %s)) ON CONFLICT DO NOTHING",
        (storage_id, topic, delay_s))


def due(pool: ConnectionPool) -> list[tuple[str, str]]:
    """``(storage_id, topic)`` of every removal whose time has come."""
    return pool.fetch_all(
        "SELECT storage_id, topic FROM topic_deletions WHERE due_at <= now() ORDER BY due_at")


@contextmanager
def claimed(pool: ConnectionPool, storage_id: str, topic: str) -> Iterator[bool]:
    """Hold the pending removal of a topic for the block. Yields False when there
    is none (already done) or another process holds it; otherwise the removal is
    forgotten when the block ends, and kept for a retry when it raises."""
    with pool.transaction() as cursor:
        cursor.execute(
            "SELECT 1 FROM topic_deletions WHERE storage_id = %s AND topic = %s"
            " FOR UPDATE SKIP LOCKED", (storage_id, topic))
        held = cursor.fetchone() is not None
        yield held
        if held:
            cursor.execute(
                "DELETE FROM topic_deletions WHERE storage_id = %s AND topic = %s",
                (storage_id, topic))
