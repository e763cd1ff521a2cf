"""Group commit for the ``postgres`` engine.

Every append waits for a durable commit, and every commit that notifies
readers takes a lock PostgreSQL holds across all sessions. One transaction per
request caps a worker at a few thousand appends per second whatever their
size. So appends from concurrent greenlets are queued, and a writer greenlet
takes everything queued and stores it in one transaction: one commit and one
NOTIFY per topic for the lot. Under light load a transaction carries a single
append and nothing waits; under heavy load transactions grow instead of
queueing.

One writer, not two: with two, single events sent at about half the saturated
rate waited p99 11.5-118 ms (over 25 ms in six runs of twelve), with one
6.5-18.4 ms (p50 2.8-4.8 ms against 4.0-11.9). Every notifying commit takes the
lock above in turn, so more of them in flight seem only to lengthen that queue.
Saturated rates at batch 1, 10, 100 and 1,000 moved within their spread
(``bench_publish --engines postgres``, alternated runs).

While appends come faster than transactions finish (the last transaction
carried more than one), the writer lingers before taking the queue, so that
each transaction carries more of them: until every greenlet of the worker that
can run has run (requests already received have parsed their events and
queued them), and at most ``GROUPED_LINGER_S`` while the worker stays busy. A
transaction's own costs (its NOTIFY, which wakes every listening backend, and
the commit) were most of what PostgreSQL spent per single-event publish:
saturated with single events on a slow machine, lingering 1 ms took
PostgreSQL's CPU per request from 280-370 to 79-107 us and the workers' from
1.45-1.54 to 1.33-1.40 ms (2026-11-28, midday, in the benchmarks' history).
A fixed 1 ms left a fast machine a third idle, though: its workers had queued
every request they held well before, and waited. Lingering only while the
worker has something to run served 25-51% more requests there than the
fixed 1 ms (eight alternated pairs at batch 1 and 10); with one to three
busy-looping processes beside the broker, from 20% fewer to 47% more, 17% more
in all (sixteen pairs; 2026-11-28, evening). An append that finds the writer
idle after a transaction of one goes at once, so a trickle of events waits for
nothing.

When a shared transaction fails, each of its appends is written again on its
own, so one bad append (a deleted topic, say) fails only its own caller. Not
when the database failed (``is_database_outage``): the statement may have been
done all the same (a server that hung runs what it was sent once it resumes), so
writing its appends again could store twice events that a 200 then acknowledges,
and each append written alone would wait out the timeout in turn while every
later one queued behind them (30 publishes against a hung server were answered
one every 5 s, the last after 97 s). All of them fail at once, with the error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import gevent
import gevent.event
import psycopg2
from psycopg2.extensions import ISQLQuote

from app.dependencies import is_database_outage
from app.green_wait import until_idle
from app.repository.database import BoundedConnection, ConnectionPool
from app.storage.engine import line_ends

CHANNEL = "nakadi_log"
MAX_APPENDS_PER_TRANSACTION = 500
GROUPED_LINGER_S = 0.001
"""The longest the writer lingers for more appends while its worker stays busy."""
# A chunk holds at most CHUNK_EVENTS events (log_chunks checks it: readers rely on it to
# bound their index ranges), and grows past CHUNK_BYTES only by its first event.
CHUNK_EVENTS = 1000
CHUNK_BYTES = 256 << 10

log = logging.getLogger(__name__)

# One statement, run outside any transaction block, is its own transaction: the
# client waits one round trip, and holds the partitions' row locks only while the
# server runs it and flushes the commit (a BEGIN, a statement and a COMMIT would
# hold them for three round trips through a busy worker).
#
# Each (topic, partition) comes as one or more chunks in order: a count and the
# events' JSON one per line. Partitions are locked in ascending order first, so
# concurrent appends that share partitions cannot deadlock. A partition that does
# not exist has no counter: its chunks get a NULL offset, which log_chunks
# refuses, failing the whole statement (every partition or none).
#
# The statement is prepared once per connection (parsing and planning it cost
# about as much server time as running it for one event); LISTEN already ties
# the engine to session pooling, so prepared statements add no constraint. The
# connection remembers it: trying EXECUTE first logged an ERROR in PostgreSQL's
# log for every new connection.
PREPARED_NAME = "nakadi_append_chunks"
PREPARE_APPEND = """
PREPARE nakadi_append_chunks (bigint[], integer[], bigint[], text[], bytea[], text) AS
WITH chunks AS (
    SELECT topic_id, partition, count, payloads, line_ends,
           (sum(count) OVER (PARTITION BY topic_id, partition ORDER BY ordinal))::bigint - count
               AS skip
    FROM unnest($1, $2, $3, $4, $5)
         WITH ORDINALITY AS c (topic_id, partition, count, payloads, line_ends, ordinal)
), wanted AS (
    SELECT topic_id, partition, sum(count)::bigint AS count FROM chunks
    GROUP BY topic_id, partition
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
    INSERT INTO log_chunks (topic_id, partition, first_offset, last_offset, payloads, line_ends)
    SELECT c.topic_id, c.partition, n.first_offset + c.skip,
           n.first_offset + c.skip + c.count - 1, c.payloads, c.line_ends
    FROM chunks c LEFT JOIN counters n ON n.topic_id = c.topic_id AND n.partition = c.partition
)
SELECT topic_id, partition, first_offset, pg_notify($6, topic_id::text) FROM counters
"""

APPEND = ("EXECUTE nakadi_append_chunks"
          " (%(topics)s, %(partitions)s, %(counts)s, %(payloads)s, %(ends)s, %(channel)s)")


def chunked(payloads: Sequence[bytes]) -> Iterator[Sequence[bytes]]:
    """The payloads of one partition in consecutive chunks that CHUNK_EVENTS and
    CHUNK_BYTES bound."""
    if len(payloads) <= CHUNK_EVENTS and sum(map(len, payloads)) <= CHUNK_BYTES:
        yield payloads  # every batch but the largest
        return
    start = size = 0
    for index, payload in enumerate(payloads):
        if index > start and (index - start == CHUNK_EVENTS or size + len(payload) > CHUNK_BYTES):
            yield payloads[start:index]
            start, size = index, 0
        size += len(payload)
    yield payloads[start:]


class TextLiteral:
    """UTF-8 text handed to psycopg2 as bytes and quoted as an SQL string literal.
    psycopg2 would send ``bytes`` as ``bytea``, and a ``str`` costs a decode, an
    encode and libpq's escaping: 1.6 against 0.7 us an event for 8 chunks of 1,000
    ~400-byte events. ``E''`` quoting reads the same whatever
    ``standard_conforming_strings`` is."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __conform__(self, protocol: object) -> TextLiteral | None:
        return self if protocol is ISQLQuote else None

    def getquoted(self) -> bytes:
        return b"E'" + self.data.replace(b"\\", b"\\\\").replace(b"'", b"''") + b"'"


class MissingPartitions(Exception):
    """A partition of the append does not exist (its topic was deleted, or never had it)."""


@dataclass
class PendingAppend:
    topic_id: int
    batches: Mapping[int, Sequence[bytes]]
    # Set by the writer greenlet: each partition's first offset, or the error.
    done: gevent.event.AsyncResult[dict[int, int]] = field(
        default_factory=gevent.event.AsyncResult)


class GroupAppender:
    def __init__(self, pool: ConnectionPool, linger_s: float = GROUPED_LINGER_S) -> None:
        self._pool = pool
        self._linger_s = linger_s
        self._queue: list[PendingAppend] = []
        self._queued = gevent.event.Event()
        self._writer: gevent.Greenlet | None = None

    def append(self, topic_id: int, batches: Mapping[int, Sequence[bytes]]) -> dict[int, int]:
        """Store the batches (partition -> payloads, none empty); returns each
        partition's first offset once committed. Raises ``MissingPartitions`` or
        ``psycopg2.Error``."""
        pending = PendingAppend(topic_id, batches)
        self._queue.append(pending)
        self._queued.set()
        if self._writer is None or self._writer.dead:
            self._writer = gevent.spawn(self._write_forever)
        first_offsets = pending.done.get()
        assert first_offsets is not None, "the writer sets offsets or an exception"
        return first_offsets

    def _write_forever(self) -> None:
        grouped = False  # the last transaction carried more than one append
        while True:
            self._queued.wait()
            if not self._queue:
                self._queued.clear()
                continue
            if grouped:
                until_idle(self._linger_s)
            taken = self._queue[:MAX_APPENDS_PER_TRANSACTION]
            grouped = len(taken) > 1
            del self._queue[:MAX_APPENDS_PER_TRANSACTION]
            try:
                results = self._write(taken)
            except (psycopg2.Error, MissingPartitions) as error:
                if len(taken) == 1 or is_database_outage(error):
                    for pending in taken:
                        pending.done.set_exception(error)
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
        for index, pending in enumerate(taken):
            try:
                pending.done.set(self._write([pending])[0])
            except (psycopg2.Error, MissingPartitions) as error:
                if is_database_outage(error):  # the rest would each wait it out
                    for failed in taken[index:]:
                        failed.done.set_exception(error)
                    return
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
        topics, partitions, counts, ends = [], [], [], []
        chunks: list[TextLiteral] = []
        for (topic, partition), events in sorted(merged.items()):
            for chunk in chunked(events):
                topics.append(topic)
                partitions.append(partition)
                counts.append(len(chunk))
                chunks.append(TextLiteral(b"\n".join(chunk)))
                ends.append(line_ends(chunk))
        params = {"topics": topics, "partitions": partitions, "counts": counts,
                  "payloads": chunks, "ends": ends, "channel": CHANNEL}
        try:
            with self._pool.statement() as cursor:
                prepared = cast(BoundedConnection, cursor.connection).prepared
                if PREPARED_NAME not in prepared:  # a new connection
                    cursor.execute(PREPARE_APPEND)
                    prepared.add(PREPARED_NAME)
                cursor.execute(APPEND, params)
                rows = cursor.fetchall()
        except psycopg2.errors.NotNullViolation:
            raise MissingPartitions() from None
        first = {(topic, partition): offset for topic, partition, offset, _ in rows}
        return [{partition: first[(pending.topic_id, partition)] + offset
                 for partition, offset in start.items()}
                for pending, start in zip(taken, starts, strict=True)]

    def close(self) -> None:
        if self._writer is not None:
            self._writer.kill()
            self._writer = None
