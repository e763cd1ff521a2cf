"""Group commit for the ``postgres`` engine.

Every append waits for a durable commit, and every commit that notifies
readers takes a lock PostgreSQL holds across all sessions. One transaction per
request caps a worker at a few thousand appends per second whatever their
size. So appends from concurrent greenlets are queued, and a few writer
greenlets each take everything queued and store it in one transaction: one
commit and one NOTIFY per topic for the lot. Under light load a transaction
carries a single append and nothing waits; under heavy load transactions
grow instead of queueing.

When a shared transaction fails, each of its appends is written again on its
own, so one bad append (a deleted topic, say) fails only its own caller.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import gevent
import gevent.event
import psycopg2

from app.repository.database import ConnectionPool

CHANNEL = "nakadi_log"
WRITERS = 2
MAX_APPENDS_PER_TRANSACTION = 500

log = logging.getLogger(__name__)

# One statement, run outside any transaction block, is its own transaction: the
# client waits one round trip, and holds the partitions' row locks only while the
# server runs it and flushes the commit (a BEGIN, a statement and a COMMIT would
# hold them for three round trips through a busy worker).
#
# Payloads come in (topic, partition) order; counts say how many each partition
# has, so an event's partition and position follow from its ordinal. Partitions
# are locked in ascending order first, so concurrent appends that share
# partitions cannot deadlock. A partition that does not exist has no counter:
# its events get a NULL offset, which log_events refuses, failing the whole
# statement (every partition or none). Payloads (UTF-8 JSON) travel as text:
# bytea literals are hex, twice the size for the server to parse.
#
# The statement is prepared once per connection (parsing and planning it cost
# about as much server time as running it for one event); LISTEN already ties
# the engine to session pooling, so prepared statements add no constraint.
PREPARE_APPEND = """
PREPARE nakadi_append (bigint[], integer[], bigint[], text[], text) AS
WITH wanted AS (
    SELECT topic_id, partition, count,
           sum(count) OVER (ORDER BY ordinal) - count AS first_ordinal
    FROM unnest($1, $2, $3) WITH ORDINALITY AS w (topic_id, partition, count, ordinal)
), locked AS MATERIALIZED (
    SELECT p.topic_id, p.partition FROM log_partitions p
    JOIN wanted w ON p.topic_id = w.topic_id AND p.partition = w.partition
    ORDER BY p.topic_id, p.partition FOR UPDATE OF p
), counters AS (
    UPDATE log_partitions p SET next_offset = p.next_offset + w.count
    FROM wanted w JOIN locked l ON l.topic_id = w.topic_id AND l.partition = w.partition
    WHERE p.topic_id = w.topic_id AND p.partition = w.partition
    RETURNING p.topic_id, p.partition, p.next_offset - w.count AS first_offset
), appended AS (
    INSERT INTO log_events (topic_id, partition, event_offset, payload)
    SELECT w.topic_id, w.partition, c.first_offset + e.ordinal - 1 - w.first_ordinal,
           convert_to(e.payload, 'UTF8')
    FROM unnest($4) WITH ORDINALITY AS e (payload, ordinal)
    JOIN wanted w ON e.ordinal > w.first_ordinal AND e.ordinal <= w.first_ordinal + w.count
    LEFT JOIN counters c ON c.topic_id = w.topic_id AND c.partition = w.partition
)
SELECT topic_id, partition, first_offset, pg_notify($5, topic_id::text) FROM counters
"""

APPEND = "EXECUTE nakadi_append (%(topics)s, %(partitions)s, %(counts)s, %(payloads)s, %(channel)s)"


class MissingPartitions(Exception):
    """A partition of the append does not exist (its topic was deleted, or never had it)."""


@dataclass
class PendingAppend:
    topic_id: int
    batches: Mapping[int, Sequence[bytes]]
    # Set by a writer greenlet: each partition's first offset, or the error.
    done: gevent.event.AsyncResult[dict[int, int]] = field(
        default_factory=gevent.event.AsyncResult)


class GroupAppender:
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._queue: list[PendingAppend] = []
        self._queued = gevent.event.Event()
        self._writers: list[gevent.Greenlet] = []

    def append(self, topic_id: int, batches: Mapping[int, Sequence[bytes]]) -> dict[int, int]:
        """Store the batches (partition -> payloads, none empty); returns each
        partition's first offset once committed. Raises ``MissingPartitions`` or
        ``psycopg2.Error``."""
        pending = PendingAppend(topic_id, batches)
        self._queue.append(pending)
        self._queued.set()
        if len(self._writers) < WRITERS or any(w.dead for w in self._writers):
            self._writers = [w for w in self._writers if not w.dead]
            self._writers += [gevent.spawn(self._write_forever)
                              for _ in range(WRITERS - len(self._writers))]
        first_offsets = pending.done.get()
        assert first_offsets is not None, "writers set offsets or an exception"
        return first_offsets

    def _write_forever(self) -> None:
        while True:
            self._queued.wait()
            if not self._queue:
                self._queued.clear()
                continue
            taken = self._queue[:MAX_APPENDS_PER_TRANSACTION]
            del self._queue[:MAX_APPENDS_PER_TRANSACTION]
            try:
                results = self._write(taken)
            except (psycopg2.Error, MissingPartitions) as error:
                if len(taken) == 1:
                    taken[0].done.set_exception(error)
                    continue
                self._write_one_by_one(taken)
            except BaseException as error:
                for pending in taken:
                    pending.done.set_exception(error)
                raise
            else:
                for pending, result in zip(taken, results, strict=True):
                    pending.done.set(result)

    def _write_one_by_one(self, taken: list[PendingAppend]) -> None:
        for pending in taken:
            try:
                pending.done.set(self._write([pending])[0])
            except (psycopg2.Error, MissingPartitions) as error:
                pending.done.set_exception(error)

    def _write(self, taken: list[PendingAppend]) -> list[dict[int, int]]:
        """One statement (and so one transaction) for all of ``taken``; each append's first
        offset per partition, once committed."""
        # Per (topic, partition): every payload in queue order, and where each append starts.
        merged: dict[tuple[int, int], list[bytes]] = {}
        starts: list[dict[int, int]] = []
        for pending in taken:
            start = {}
            for partition, payloads in pending.batches.items():
                key = (pending.topic_id, partition)
                events = merged.setdefault(key, [])
                start[partition] = len(events)
                events.extend(payloads)
            starts.append(start)
        keys = sorted(merged)
        params = {
            "topics": [topic for topic, _ in keys],
            "partitions": [partition for _, partition in keys],
            "counts": [len(merged[key]) for key in keys],
            "payloads": [p.decode() for key in keys for p in merged[key]],
            "channel": CHANNEL,
        }
        with self._pool.connection() as conn:
            conn.autocommit = True
            try:
                with conn.cursor() as cursor:
                    try:
                        cursor.execute(APPEND, params)
                    except psycopg2.errors.InvalidSqlStatementName:  # a new connection
                        cursor.execute(PREPARE_APPEND)
                        cursor.execute(APPEND, params)
                    rows = cursor.fetchall()
            except psycopg2.errors.NotNullViolation:
                raise MissingPartitions() from None
            finally:
                if not conn.closed:
                    conn.autocommit = False
        first = {(topic, partition): offset for topic, partition, offset, _ in rows}
        return [{partition: first[(pending.topic_id, partition)] + offset
                 for partition, offset in start.items()}
                for pending, start in zip(taken, starts, strict=True)]

    def close(self) -> None:
        gevent.killall(self._writers)
        self._writers = []
