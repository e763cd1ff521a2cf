"""The ``event_types``, ``event_type_schemas`` and ``timelines`` tables.

Event types are kept as their JSON documents (``app.domain.event_type_document``);
their schema versions are kept apart so the history can be listed.
"""

from __future__ import annotations

import uuid

import psycopg2.extensions
from psycopg2.extras import Json

from app.domain.event_type import EventType, EventTypeSchema
from app.domain.event_type_document import (
    event_type_document,
    event_type_from_document,
    schema_document,
    schema_from_document,
)
from app.domain.timeline import Timeline, Timelines
from app.repository import subscriptions, topic_deletions
from app.repository.database import ConnectionPool

CHANGES_CHANNEL = "nakadi_event_types"
NOTIFY_CHANGE = "SELECT pg_notify('nakadi_event_types', %s)"
TIMELINE_COLUMNS = ("id, event_type, timeline_order, storage_id, topic, partitions, last_offsets,"
                    " cleaned_up_at IS NOT NULL")


class EventTypeExists(Exception):
    """An event type of that name exists already."""


class EventTypeChanged(Exception):
    """The event type is no longer the one a change was made from: another change came
    first (``current``), or it was deleted (``current`` is None)."""

    def __init__(self, current: EventType | None) -> None:
        super().__init__("the event type changed meanwhile")
        self.current = current


class EventTypeInUse(Exception):
    """Subscriptions read the event type, so it cannot be deleted."""

    NAMED = 10  # at most this many ids in the message

    def __init__(self, name: str, subscription_ids: list[str]) -> None:
        named = ", ".join(subscription_ids[:self.NAMED])
        more = len(subscription_ids) - self.NAMED
        super().__init__(f"EventType '{name}' is read by subscriptions {named}"
                         f"{f' and {more} more' if more > 0 else ''}; delete them first.")


def _version_key(version: str) -> tuple[int, int, int]:
    major, minor, patch = (int(part) for part in version.split("."))
    return major, minor, patch


def _insert_schema(cursor: psycopg2.extensions.cursor, name: str,
                   schema: EventTypeSchema) -> None:
    cursor.execute(
        "INSERT INTO event_type_schemas (event_type, major, minor, patch, document)"
        " VALUES (%s, %s, %s, %s, %s)",
        (name, *_version_key(schema.version), Json(schema_document(schema))))


def insert_event_type(pool: ConnectionPool, event_type: EventType, storage_id: str, topic: str,
                      partitions: int) -> Timeline:
    """Store a new event type, its first schema version and its first timeline."""
    name = event_type.name
    timeline = Timeline(str(uuid.uuid4()), name, 1, storage_id, topic, partitions)
    try:
        with pool.transaction() as cursor:
            cursor.execute("INSERT INTO event_types (name, document) VALUES (%s, %s)",
                           (name, Json(event_type_document(event_type))))
            _insert_schema(cursor, name, event_type.schema)
            cursor.execute(
                "INSERT INTO timelines (id, event_type, timeline_order, storage_id, topic,"
                " partitions, switched_at) VALUES (%s, %s, 1, %s, %s, %s, now())",
                (timeline.id, name, storage_id, topic, partitions))
            cursor.execute(NOTIFY_CHANGE, (name,))
    except psycopg2.errors.UniqueViolation:
        raise EventTypeExists(name) from None
    return timeline


def update_event_type(pool: ConnectionPool, event_type: EventType, new_schema_version: bool,
                      evolved_from: EventType) -> None:
    """Replace an event type's document, adding its schema to the history when new, if
    it still is ``evolved_from``; else ``EventTypeChanged``. The row stays locked from
    that check to the commit, so of two concurrent changes the second sees the first."""
    name = event_type.name
    with pool.transaction() as cursor:
        cursor.execute("SELECT document FROM event_types WHERE name = %s FOR UPDATE", (name,))
        row = cursor.fetchone()
        current = event_type_from_document(row[0]) if row else None
        if current != evolved_from:
            raise EventTypeChanged(current)
        cursor.execute(
            "UPDATE event_types SET document = %s, updated_at = now() WHERE name = %s",
            (Json(event_type_document(event_type)), name))
        if new_schema_version:
            _insert_schema(cursor, name, event_type.schema)
        cursor.execute(NOTIFY_CHANGE, (name,))


def get_event_type(pool: ConnectionPool, name: str) -> EventType | None:
    rows = pool.fetch_all("SELECT document FROM event_types WHERE name = %s", (name,))
    return event_type_from_document(rows[0][0]) if rows else None


def list_event_types(pool: ConnectionPool) -> list[EventType]:
    return [event_type_from_document(row[0])
            for row in pool.fetch_all("SELECT document FROM event_types ORDER BY name")]


def delete_event_type(pool: ConnectionPool, name: str, topic_removal_delay_s: float,
                      with_sole_subscriptions: bool = False) -> tuple[list[Timeline], list[str]]:
    """Delete an event type with its schemas and timelines, and schedule the
    removal of their topics; returns the timelines and the ids of the subscriptions
    deleted with it. Raises EventTypeInUse when subscriptions read it, except, with
    ``with_sole_subscriptions``, those that read nothing else: they go with it; and
    ``EventTypeChanged`` when it is gone already (deleted at the same time)."""
    with pool.transaction() as cursor:
        # Locked first: a subscription being created holds a share lock on it.
        cursor.execute("SELECT 1 FROM event_types WHERE name = %s FOR UPDATE", (name,))
        if cursor.fetchone() is None:
            raise EventTypeChanged(None)
        deleted = (subscriptions.delete_sole_readers(cursor, name)
                   if with_sole_subscriptions else [])
        readers = subscriptions.readers_of(cursor, name)
        if readers:
            raise EventTypeInUse(name, readers)
        cursor.execute(
            f"SELECT {TIMELINE_COLUMNS} FROM timelines WHERE event_type = %s"
            " ORDER BY timeline_order", (name,))
        timelines = [timeline_from_row(row) for row in cursor.fetchall()]
        topic_deletions.schedule(cursor, name, topic_removal_delay_s)
        cursor.execute("DELETE FROM event_types WHERE name = %s", (name,))
        cursor.execute(NOTIFY_CHANGE, (name,))
    return timelines, deleted


def schema_versions(pool: ConnectionPool, name: str, offset: int, limit: int
                    ) -> tuple[list[EventTypeSchema], int]:
    """A page of an event type's schema versions, newest first, and how many there are."""
    rows = pool.fetch_all(
        "SELECT document, count(*) OVER () FROM event_type_schemas WHERE event_type = %s"
        " ORDER BY major DESC, minor DESC, patch DESC OFFSET %s LIMIT %s",
        (name, offset, limit))
    if rows:
        return [schema_from_document(row[0]) for row in rows], rows[0][1]
    total = pool.fetch_all(
        "SELECT count(*) FROM event_type_schemas WHERE event_type = %s", (name,))[0][0]
    return [], total


def schema_version(pool: ConnectionPool, name: str, version: str) -> EventTypeSchema | None:
    """One schema version of an event type (``version`` is MAJOR.MINOR.PATCH)."""
    rows = pool.fetch_all(
        "SELECT document FROM event_type_schemas WHERE event_type = %s"
        " AND (major, minor, patch) = (%s, %s, %s)", (name, *_version_key(version)))
    return schema_from_document(rows[0][0]) if rows else None


def timeline_from_row(row: tuple) -> Timeline:
    """A timeline from the ``TIMELINE_COLUMNS`` of a row."""
    timeline_id, event_type, order, storage_id, topic, partitions, last, cleaned_up = row
    return Timeline(str(timeline_id), event_type, order, storage_id, topic, partitions,
                    None if last is None else tuple(last), cleaned_up)


def event_type_with_timelines(pool: ConnectionPool, name: str
                              ) -> tuple[EventType, Timelines] | None:
    """An event type and its timelines, in one round trip."""
    rows = pool.fetch_all(
        "SELECT e.document, t.id, t.event_type, t.timeline_order, t.storage_id, t.topic,"
        " t.partitions, t.last_offsets, t.cleaned_up_at IS NOT NULL"
        " FROM event_types e JOIN timelines t ON t.event_type = e.name"
        " WHERE e.name = %s ORDER BY t.timeline_order", (name,))
    if not rows:
        return None
    return (event_type_from_document(rows[0][0]),
            Timelines(tuple(timeline_from_row(row[1:]) for row in rows)))


def default_storage_id(pool: ConnectionPool) -> str:
    rows = pool.fetch_all("SELECT id FROM storages WHERE is_default")
    if not rows:
        raise LookupError("no default storage is set")
    return rows[0][0]
