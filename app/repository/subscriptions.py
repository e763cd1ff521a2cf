"""The ``subscriptions`` table.

A subscription's key (owning application, set of event types, consumer group)
is unique through ``key_digest``; creating one is idempotent and safe between
concurrent creates. Creating one holds a key-share lock on its event types'
rows until it commits, and deleting an event type locks its row before looking
for subscriptions that read it, so neither can slip past the other.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg2.extensions
from psycopg2.extras import Json

from app.domain.subscription import InitialCursor, Subscription
from app.repository.database import ConnectionPool

COLUMNS = ('id, owning_application, event_types, consumer_group, read_from, initial_cursors,'
           ' "authorization", created_at, updated_at')
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
CHANGES_CHANNEL = "nakadi_subscriptions"
NOTIFY_CHANGE = f"SELECT pg_notify('{CHANGES_CHANNEL}', %s)"
# A create that finds its key taken, and the holder deleted before it could be
# read, tries again; more than this many times in a row is not a race any more.
INSERT_ATTEMPTS = 5


class EventTypesMissing(Exception):
    """Some of a new subscription's event types do not exist (any more)."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(", ".join(names))
        self.names = tuple(names)


@dataclass(frozen=True)
class SubscriptionPage:
    items: list[Subscription]
    has_more: bool


def is_subscription_id(value: str) -> bool:
    """Whether ``value`` has the form of a subscription id (a UUID in canonical form)."""
    return UUID.fullmatch(value) is not None


def key_digest(owning_application: str, event_types: Sequence[str], consumer_group: str) -> str:
    """The digest of a subscription's key; the order of the event types does not matter."""
    canonical = json.dumps([owning_application, consumer_group, sorted(event_types)],
                           ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _subscription(row: tuple) -> Subscription:
    (subscription_id, owning_application, event_types, consumer_group, read_from,
     initial_cursors, authorization, created_at, updated_at) = row
    return Subscription(
        id=str(subscription_id),
        owning_application=owning_application,
        event_types=tuple(event_types),
        consumer_group=consumer_group,
        read_from=read_from,
        created_at=created_at,
        updated_at=updated_at,
        initial_cursors=tuple(InitialCursor(**cursor) for cursor in initial_cursors),
        authorization=authorization,
    )


def _cursors_json(cursors: Sequence[InitialCursor]) -> Json:
    return Json([{"event_type": c.event_type, "partition": c.partition, "offset": c.offset}
                 for c in cursors])


def _authorization_json(authorization: dict[str, Any] | None) -> Json | None:
    return None if authorization is None else Json(authorization)


def insert_subscription(pool: ConnectionPool, subscription: Subscription
                        ) -> tuple[Subscription, bool]:
    """Store a new subscription, unless one with its key exists already: returns the
    stored subscription and whether it is the new one. Raises EventTypesMissing when
    an event type does not exist when the row is written."""
    digest = key_digest(subscription.owning_application, subscription.event_types,
                        subscription.consumer_group)
    for _ in range(INSERT_ATTEMPTS):
        with pool.transaction() as cursor:
            cursor.execute("SELECT name FROM event_types WHERE name = ANY(%s) FOR KEY SHARE",
                           (list(subscription.event_types),))
            found = {row[0] for row in cursor.fetchall()}
            missing = [name for name in subscription.event_types if name not in found]
            if missing:
                raise EventTypesMissing(missing)
            # A concurrent create of the same key makes this wait for its commit,
            # then do nothing; the SELECT below (a new snapshot) sees its row.
            cursor.execute(
                f"INSERT INTO subscriptions ({COLUMNS}, key_digest)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                f" ON CONFLICT (key_digest) DO NOTHING RETURNING {COLUMNS}",
                (subscription.id, subscription.owning_application,
                 sorted(subscription.event_types), subscription.consumer_group,
                 subscription.read_from, _cursors_json(subscription.initial_cursors),
                 _authorization_json(subscription.authorization), subscription.created_at,
                 subscription.updated_at, digest))
            row = cursor.fetchone()
            if row is not None:
                return _subscription(row), True
            cursor.execute(f"SELECT {COLUMNS} FROM subscriptions WHERE key_digest = %s",
                           (digest,))
            row = cursor.fetchone()
            if row is not None:
                return _subscription(row), False
    raise RuntimeError(f"the key of subscription {subscription.id} kept being taken and freed")


def find_by_key(pool: ConnectionPool, owning_application: str, event_types: Sequence[str],
                consumer_group: str) -> Subscription | None:
    rows = pool.fetch_all(f"SELECT {COLUMNS} FROM subscriptions WHERE key_digest = %s",
                          (key_digest(owning_application, event_types, consumer_group),))
    return _subscription(rows[0]) if rows else None


def get_subscription(pool: ConnectionPool, subscription_id: str) -> Subscription | None:
    """The subscription with that id; None when there is none or the id is malformed."""
    if not is_subscription_id(subscription_id):
        return None
    rows = pool.fetch_all(f"SELECT {COLUMNS} FROM subscriptions WHERE id = %s",
                          (subscription_id,))
    return _subscription(rows[0]) if rows else None


def list_subscriptions(pool: ConnectionPool, owning_application: str | None,
                       event_types: Sequence[str], offset: int, limit: int) -> SubscriptionPage:
    """A page of subscriptions, newest first: those of the owning application (when
    given) that read every one of ``event_types``."""
    conditions: list[str] = []
    params: list[Any] = []
    if owning_application is not None:
        conditions.append("owning_application = %s")
        params.append(owning_application)
    if event_types:
        conditions.append("event_types @> %s::text[]")
        params.append(list(event_types))
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    rows = pool.fetch_all(
        f"SELECT {COLUMNS} FROM subscriptions{where}"
        " ORDER BY created_at DESC, id DESC OFFSET %s LIMIT %s",
        (*params, offset, limit + 1))
    return SubscriptionPage([_subscription(row) for row in rows[:limit]], len(rows) > limit)


def update_authorization(pool: ConnectionPool, subscription_id: str,
                         authorization: dict[str, Any], now: datetime) -> Subscription | None:
    """Set a subscription's authorization; ``updated_at`` moves only when it changes.
    None when there is no such subscription."""
    with pool.transaction() as cursor:
        cursor.execute(
            'UPDATE subscriptions SET "authorization" = %s, updated_at = %s'
            ' WHERE id = %s AND "authorization" IS DISTINCT FROM %s'
            f" RETURNING {COLUMNS}",
            (Json(authorization), now, subscription_id, Json(authorization)))
        row = cursor.fetchone()
        if row is None:
            cursor.execute(f"SELECT {COLUMNS} FROM subscriptions WHERE id = %s",
                           (subscription_id,))
            row = cursor.fetchone()
        else:
            cursor.execute(NOTIFY_CHANGE, (subscription_id,))
    return _subscription(row) if row is not None else None


def delete_subscription(pool: ConnectionPool, subscription_id: str) -> bool:
    """Delete a subscription's row; False when there was none. Every process hears of
    it (``CHANGES_CHANNEL``) once it is committed."""
    with pool.transaction() as cursor:
        cursor.execute("DELETE FROM subscriptions WHERE id = %s", (subscription_id,))
        if cursor.rowcount != 1:
            return False
        cursor.execute(NOTIFY_CHANGE, (subscription_id,))
    return True


def readers_of(cursor: psycopg2.extensions.cursor, event_type: str) -> list[str]:
    """Ids of the subscriptions reading the event type, oldest first, in the caller's
    transaction."""
    cursor.execute(
        "SELECT id FROM subscriptions WHERE event_types @> ARRAY[%s]::text[]"
        " ORDER BY created_at, id", (event_type,))
    return [str(row[0]) for row in cursor.fetchall()]


def delete_sole_readers(cursor: psycopg2.extensions.cursor, event_type: str) -> list[str]:
    """Delete the subscriptions that read the event type and nothing else, in the
    caller's transaction; returns their ids."""
    cursor.execute("DELETE FROM subscriptions WHERE event_types = ARRAY[%s]::text[]"
                   " RETURNING id", (event_type,))
    deleted = [str(row[0]) for row in cursor.fetchall()]
    for subscription_id in deleted:
        cursor.execute(NOTIFY_CHANGE, (subscription_id,))
    return deleted
