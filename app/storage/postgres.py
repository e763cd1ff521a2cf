"""The ``postgres`` storage engine: an append-only log in PostgreSQL.

An append takes its offsets by incrementing the partition's ``next_offset``
row, which stays locked until the append commits: offsets are gap-free, and
they become visible in order, so a reader reading "after N" never skips an
event that commits later. Each append stores its events in chunks, rows of up
to a thousand consecutive offsets of one partition, so reading and writing cost
the server a row per batch, not per event. Appends are committed in groups
(``postgres_appender``), each notifying ``nakadi_log`` in its transaction; one
listening connection per process wakes the greenlets that wait for new events
of that topic.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime

import gevent
import gevent.event
import psycopg2

from app.dependencies import first_line, is_database_outage
from app.repository.database import ConnectionPool, Params
from app.shared_calls import SharedCalls
from app.storage.engine import (
    BEFORE_FIRST,
    EventRun,
    Keys,
    Lines,
    PartitionBounds,
    StorageEngine,
    StorageError,
    StorageUnavailable,
    TopicNotFound,
    read_line_ends,
    split_runs,
)
from app.storage.postgres_appender import (
    CHANNEL,
    CHUNK_EVENTS,
    GroupAppender,
    MissingPartitions,
    TextLiteral,
)

PURGE_CHUNKS = 1_000

log = logging.getLogger(__name__)

# Offsets are gap-free above a partition's purged prefix, and a chunk holds at
# most CHUNK_EVENTS of them: the chunks with events in (after, after + share]
# end in (after, after + share + CHUNK_EVENTS), a bounded index range whatever
# plan the statistics lead to. Payloads are UTF-8 JSON lines: sent as text they
# cross the wire as they are, and come back as bytes.
READ_RANGE = """
SELECT %s, first_offset, last_offset, holes, payloads, line_ends FROM log_chunks
WHERE topic_id = %s AND partition = %s AND last_offset > %s AND last_offset < %s
  AND first_offset <= %s
ORDER BY last_offset
"""

# A partition's oldest offset is the first of the chunk that ends first.
OLDEST = """
SELECT p.partition, (SELECT first_offset FROM log_chunks e
                     WHERE e.topic_id = %s AND e.partition = p.partition
                     ORDER BY last_offset LIMIT 1)
FROM unnest(%s::integer[]) AS p (partition)
"""

# The partitions of compacted topics with events after their last compaction, which
# was at least %s seconds ago (or never): the offset it reached (-1: none) and the
# newest committed one.
COMPACTABLE = """
SELECT p.topic_id, p.partition, coalesce(c.compacted_to, -1), p.next_offset - 1
FROM log_topics t JOIN log_partitions p ON p.topic_id = t.id
LEFT JOIN log_compactions c ON c.topic_id = p.topic_id AND c.partition = p.partition
WHERE t.compacted AND p.next_offset - 1 > coalesce(c.compacted_to, -1)
  AND (c.compacted_at IS NULL OR c.compacted_at < now() - %s * interval '1 second')
"""

# The chunk (its last offset), offset and compaction key of each event still there in
# the chunks ending in (%s, %s], the newest first. PostgreSQL reads the keys out of the
# events, except out of those holding an escaped NUL (valid JSON that PostgreSQL refuses
# to read): no key, kept.
EVENT_KEYS = """
SELECT c.last_offset, c.first_offset + l.n - 1 AS event_offset,
       CASE WHEN strpos(l.line, '\\u0000') = 0
            THEN l.line::jsonb -> 'metadata' ->> 'partition_compaction_key' END
FROM log_chunks c,
     unnest(string_to_array(c.payloads, E'\\n')) WITH ORDINALITY AS l (line, n)
WHERE c.topic_id = %s AND c.partition = %s AND c.last_offset > %s AND c.last_offset <= %s
  AND l.line <> ''
ORDER BY event_offset DESC
"""

# Each chunk's last offset and size, in order: no payload is read.
CHUNK_SIZES = """
SELECT last_offset, octet_length(payloads) FROM log_chunks
WHERE topic_id = %s AND partition = %s AND last_offset <= %s ORDER BY last_offset
"""

# A statement of compaction reads chunks of at most this many bytes in all (or a single
# larger chunk): PostgreSQL reads ~100 MB of events a second here, so it ends far below
# the statement timeout on slower machines too, whatever the events' size.
COMPACTION_BYTES = 32 << 20

REPLACED_CHUNKS = """
SELECT last_offset, first_offset, payloads FROM log_chunks
WHERE topic_id = %s AND partition = %s AND last_offset = ANY(%s)
"""

# Chunks rewritten by one statement, at most: the worker's other greenlets wait while
# it prepares them (~5 ms for 1,000 chunks of single events).
REWRITE_CHUNKS_AT_ONCE = 1_000

REWRITE_CHUNKS = """
UPDATE log_chunks c SET payloads = n.payloads, holes = true, line_ends = NULL
FROM unnest(%s::bigint[], %s::text[]) AS n (last_offset, payloads)
WHERE c.topic_id = %s AND c.partition = %s AND c.last_offset = n.last_offset
"""

# The chunks whose events were all removed: nothing but line breaks (a chunk of n
# events has n - 1). octet_length reads the stored size, not the payloads.
EMPTIED = """
SELECT first_offset, last_offset FROM log_chunks
WHERE topic_id = %s AND partition = %s AND last_offset <= %s
  AND octet_length(payloads) = last_offset - first_offset
ORDER BY last_offset
"""

# Holds a topic's deletion back until the transaction ends; no row once it is deleted.
LOCK_TOPIC = "SELECT 1 FROM log_topics WHERE id = %s FOR KEY SHARE"

# Consecutive emptied chunks become one, so removed events cost no row each.
MERGE_EMPTIED = """
WITH gone AS (
    DELETE FROM log_chunks WHERE topic_id = %(topic_id)s AND partition = %(partition)s
      AND last_offset BETWEEN %(first)s AND %(last)s
      AND octet_length(payloads) = last_offset - first_offset
    RETURNING appended_at
)
INSERT INTO log_chunks (topic_id, partition, first_offset, last_offset, appended_at,
                        payloads, holes)
SELECT %(topic_id)s, %(partition)s, %(first)s, %(last)s, max(appended_at), %(payloads)s, true
FROM gone HAVING count(*) > 0
"""

MARK_COMPACTED = """
INSERT INTO log_compactions (topic_id, partition, compacted_to) VALUES (%s, %s, %s)
ON CONFLICT (topic_id, partition)
DO UPDATE SET compacted_to = excluded.compacted_to, compacted_at = now()
"""

BOUNDS = """
SELECT p.partition,
       coalesce((SELECT first_offset FROM log_chunks e
                 WHERE e.topic_id = p.topic_id AND e.partition = p.partition
                 ORDER BY last_offset LIMIT 1), p.next_offset),
       p.next_offset - 1
FROM log_partitions p WHERE p.topic_id = %s ORDER BY p.partition
"""


def log_error(error: psycopg2.Error, storage_id: str) -> StorageError:
    """The storage error a database error means: an outage (naming the storage), or a
    refused statement."""
    if is_database_outage(error):
        return StorageUnavailable(f"PostgreSQL (the {storage_id} storage)", first_line(error))
    return StorageError(f"PostgreSQL log: {error}".strip())


class TopicWatch:
    """Wakes greenlets waiting for appends to a topic, and counts the appends heard of."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._waiters: dict[int, set[gevent.event.Event]] = defaultdict(set)
        self._heard: dict[int, int] = defaultdict(int)  # topic id -> notifications heard
        self._gaps = 0  # times notifications may have been missed
        self._listener = pool.notifications.listener(CHANNEL, self._wake, self._wake_all)

    def listening(self) -> bool:
        """Whether appends are heard of (else a waiter may never be set)."""
        return self._listener.ensure_listening()

    def heard(self, topic_id: int) -> tuple[int, int] | None:
        """A mark of what was heard of the topic's appends so far: while it stays the
        same, no append committed since it was taken has been heard of yet, so a
        waiter registered meanwhile will be set by any such append. None while
        appends go unheard (or no reader started listening yet)."""
        if not self._listener.is_listening():
            return None
        return self._gaps, self._heard.get(topic_id, 0)

    def waiter(self, topic_id: int) -> gevent.event.Event:
        """An event set by every append to the topic (and when appends may have gone
        unheard). Register it *before* checking for data, clear it before each
        check; ``forget`` it afterwards."""
        self._listener.ensure_listening()
        event = gevent.event.Event()
        self._waiters[topic_id].add(event)
        return event

    def forget(self, topic_id: int, event: gevent.event.Event) -> None:
        waiters = self._waiters.get(topic_id)
        if waiters is not None:
            waiters.discard(event)
            if not waiters:
                del self._waiters[topic_id]

    def _wake(self, payloads: set[str]) -> None:
        for topic_id in map(int, payloads):
            self._heard[topic_id] += 1
            for event in self._waiters.get(topic_id, ()):
                event.set()

    def _wake_all(self) -> None:
        """Appends may have gone unnoticed: let every waiter look again."""
        self._gaps += 1
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()

    def close(self) -> None:
        self._listener.close()


class PostgresEngine(StorageEngine):
    """Event storage in the tables of ``sql/002_postgres_log.sql``; outages name the
    storage by ``storage_id``."""

    storage_type = "postgres"

    def __init__(self, pool: ConnectionPool, storage_id: str = "postgres") -> None:
        self._pool = pool
        self._storage_id = storage_id
        self._topic_ids: dict[str, int] = {}
        self._watch = TopicWatch(pool)
        # topic id -> the newest offset of each partition, and what had been heard of
        # the topic's appends when it was read
        self._newest: dict[int, tuple[tuple[int, int], dict[int, int]]] = {}
        self._appender = GroupAppender(pool)
        self._bounds_calls: SharedCalls[str, list[PartitionBounds]] = SharedCalls()

    def _query(self, query: str, params: Params, *, text_as_bytes: bool = False
               ) -> list[tuple]:
        try:
            return self._pool.fetch_all(query, params, text_as_bytes=text_as_bytes)
        except psycopg2.Error as error:
            raise log_error(error, self._storage_id) from error

    def _execute(self, statement: str, params: Params) -> None:
        try:
            self._pool.execute(statement, params)
        except psycopg2.Error as error:
            raise log_error(error, self._storage_id) from error

    def _topic_id(self, topic: str, *, refresh: bool = False) -> int:
        if refresh or topic not in self._topic_ids:
            rows = self._query("SELECT id FROM log_topics WHERE name = %s", (topic,))
            if not rows:
                self._topic_ids.pop(topic, None)
                raise TopicNotFound(topic)
            self._topic_ids[topic] = rows[0][0]
        return self._topic_ids[topic]

    def create_topic(self, topic: str, partitions: int, retention_ms: int,
                     compacted: bool = False) -> None:
        try:
            with self._pool.transaction() as cursor:
                cursor.execute(
                    "INSERT INTO log_topics (name, partitions, retention_ms, compacted)"
                    " VALUES (%s, %s, %s, %s) RETURNING id",
                    (topic, partitions, retention_ms, compacted),
                )
                [(topic_id,)] = cursor.fetchall()
                cursor.execute(
                    "INSERT INTO log_partitions (topic_id, partition)"
                    " SELECT %s, generate_series(0, %s - 1)",
                    (topic_id, partitions),
                )
        except psycopg2.errors.UniqueViolation as error:
            raise StorageError(f"topic {topic} already exists") from error
        except psycopg2.Error as error:
            raise log_error(error, self._storage_id) from error
        self._topic_ids[topic] = topic_id

    def set_retention(self, topic: str, retention_ms: int) -> None:
        self._execute("UPDATE log_topics SET retention_ms = %s WHERE name = %s",
                      (retention_ms, topic))

    def delete_topic(self, topic: str) -> None:
        topic_id = self._topic_ids.pop(topic, None)
        if topic_id is not None:
            self._newest.pop(topic_id, None)
        try:
            with self._pool.transaction() as cursor:
                cursor.execute("DELETE FROM log_topics WHERE name = %s RETURNING id", (topic,))
                row = cursor.fetchone()
                if row is not None:
                    cursor.execute("DELETE FROM log_chunks WHERE topic_id = %s", (row[0],))
        except psycopg2.Error as error:
            raise log_error(error, self._storage_id) from error

    def append_many(
        self, topic: str, batches: Mapping[int, Sequence[bytes]], keys: Keys | None = None
    ) -> dict[int, list[int] | StorageError]:
        """All partitions in one transaction: every partition is stored, or none. Keys
        are not kept: compaction reads them from the events' metadata (``compact``)."""
        batches = {partition: payloads for partition, payloads in batches.items() if payloads}
        if not batches:
            return {}
        # one search of the joined payloads: ~36 against ~370 us for 1,000 events one by one
        if any(b"\n" in b"".join(payloads) for payloads in batches.values()):
            raise ValueError("a payload holds a line break: stored events are compact JSON")
        for attempt in range(2):
            # A cached id can be stale when the topic was deleted and created again.
            topic_id = self._topic_id(topic, refresh=attempt > 0)
            try:
                first = self._appender.append(topic_id, batches)
            except MissingPartitions:
                continue
            except psycopg2.Error as error:
                failure = log_error(error, self._storage_id)
                return dict.fromkeys(batches, failure)
            return {p: list(range(first[p], first[p] + len(batches[p]))) for p in batches}
        raise TopicNotFound(f"{topic} lacks one of the partitions {sorted(batches)}")

    def _read_many(self, topic_id: int, positions: dict[int, int], limit: int
                   ) -> tuple[list[EventRun], bool]:
        """The events after the positions, partitions in the dict's order, in whole chunks:
        about ``limit``, up to a chunk more per partition, and whether more may follow
        (a partition read as far as its share of ``limit``). Each position moves to the
        last event read.

        One UNION ALL statement with an outer LIMIT: PostgreSQL stops reading
        partitions once it has enough. When nothing comes back, a position may
        lie inside a purged prefix; such positions move up to the oldest event."""
        share = max(1, limit // len(positions))
        for attempt in range(2):
            query = " UNION ALL ".join([f"({READ_RANGE})"] * len(positions)) + " LIMIT %s"
            params: list = []
            for partition, after in positions.items():
                params += [partition, topic_id, partition, after,
                           after + share + CHUNK_EVENTS, after + share]
            rows = self._query(query, [*params, limit], text_as_bytes=True)
            if rows or attempt:
                break
            moved = False
            for partition, oldest in self._query(OLDEST, (topic_id, list(positions))):
                if oldest is not None and oldest - 1 > positions[partition]:
                    positions[partition] = oldest - 1
                    moved = True
            if not moved:
                break
        shares_end = {partition: after + share for partition, after in positions.items()}
        runs: list[EventRun] = []
        for partition, first, last, holes, payloads, ends in rows:
            skip = max(0, positions[partition] + 1 - first)
            positions[partition] = last
            if holes:
                runs += compacted_runs(partition, first + skip, payloads.split(b"\n")[skip:])
            else:  # whole, or a window of it when read from inside
                count = last - first + 1
                lines = Lines(payloads, count, read_line_ends(ends, payloads, count))
                runs.append(EventRun(partition, first + skip, lines[skip:]))
        more = len(rows) >= limit or any(positions[p] >= end for p, end in shares_end.items())
        return runs, more

    def bounds(self, topic: str) -> list[PartitionBounds]:
        """Callers for one topic at once share a call (see ``SharedCalls``): a storm of
        streams opening reads them twice per event type, not once per stream."""
        return self._bounds_calls.call(topic, lambda: self._bounds(topic))

    def _bounds(self, topic: str) -> list[PartitionBounds]:
        topic_id = self._topic_id(topic)
        # Listening from now on, so that a stream these bounds start at the end needs no
        # first read: else a storm of streams on a fresh worker read bounds before any of
        # them started listening, and each read its partitions once for nothing. Only a
        # worker's first call waits, for the listener's first attempt (at most the connect
        # timeout; a stream's first poll waited for it before). Not waiting, the storm's
        # listener connected after most of the bounds had been read.
        self._watch.listening()
        heard = self._watch.heard(topic_id)
        rows = self._query(BOUNDS, (topic_id,))
        if not rows:
            # Deleted since its id was cached (by another process): this raises TopicNotFound,
            # or finds the topic created again under the same name.
            topic_id = self._topic_id(topic, refresh=True)
            heard = self._watch.heard(topic_id)
            rows = self._query(BOUNDS, (topic_id,))
        if heard is not None:
            self._newest[topic_id] = heard, {partition: newest for partition, _, newest in rows}
        return [PartitionBounds(partition, oldest, newest) for partition, oldest, newest in rows]

    def _known_newest(self, topic_id: int, positions: Mapping[int, int]) -> bool:
        """Whether the positions are the newest of their partitions for sure: the last
        bounds read says so, and no append has been heard of since it was taken
        (then a waiter registered before this call hears of any later one)."""
        known = self._newest.get(topic_id)
        if known is None:
            return False
        heard, newest = known
        if heard != self._watch.heard(topic_id):
            del self._newest[topic_id]
            return False
        return all(newest.get(partition) == after for partition, after in positions.items())

    def reader(self, topic: str, positions: Mapping[int, int]) -> PostgresReader:
        return PostgresReader(self, topic, positions)

    def check(self) -> None:
        self._query("SELECT 1", None)

    def purge_expired(self) -> int:
        """Delete the events older than their topic's retention time; returns how many.

        Offsets grow with append time, so in each partition the expired chunks
        are a prefix; a binary search over the offset index finds where it ends
        without scanning the partition. A chunk goes when its events expired,
        all appended at once."""
        removed = 0
        partitions = self._query(
            "SELECT t.id, p.partition, now() - t.retention_ms * interval '1 millisecond'"
            " FROM log_topics t JOIN log_partitions p ON p.topic_id = t.id"
            " WHERE t.retention_ms > 0", None)  # not those kept forever (KEEP_FOREVER)
        for topic_id, partition, cutoff in partitions:
            last_expired = self._last_offset_before(topic_id, partition, cutoff)
            while last_expired is not None:
                chunks, events = self._query(
                    "WITH gone AS (DELETE FROM log_chunks WHERE (topic_id, partition, last_offset)"
                    " IN (SELECT topic_id, partition, last_offset FROM log_chunks"
                    "     WHERE topic_id = %s AND partition = %s AND last_offset <= %s"
                    "     ORDER BY last_offset LIMIT %s)"
                    " RETURNING last_offset - first_offset + 1 AS events)"
                    " SELECT count(*), coalesce(sum(events), 0)::bigint FROM gone",
                    (topic_id, partition, last_expired, PURGE_CHUNKS))[0]
                removed += events
                if chunks < PURGE_CHUNKS:
                    break
        return removed

    def compact(self, every_s: float) -> int:
        """In the topics of compacted event types, remove the events that a later event
        of the same ``metadata.partition_compaction_key`` replaced, in each partition
        with events after its last compaction, at most once every ``every_s``
        seconds; returns how many were removed.

        A removed event leaves an empty line in its chunk, so the others keep their
        offsets and readers skip it as a gap; consecutive chunks left empty become
        one. As Kafka's log cleaner does, a partition's compaction keeps in memory
        the keys of the events since the last one only: the events before it were
        compacted among themselves then, so only those keys can replace them."""
        removed = 0
        for topic_id, partition, compacted_to, upto in self._query(COMPACTABLE, (every_s,)):
            try:
                removed += self._compact_partition(topic_id, partition, compacted_to, upto)
            except StorageError as error:  # the other partitions are compacted all the same
                log.warning("compacting partition %s of log topic %s failed: %s",
                            partition, topic_id, error)
        return removed

    def _compact_partition(self, topic_id: int, partition: int, compacted_to: int,
                           upto: int) -> int:
        sizes = self._query(CHUNK_SIZES, (topic_id, partition, upto))
        seen: set[str] = set()  # the keys of the events since the last compaction
        replaced: dict[int, list[int]] = defaultdict(list)  # chunk -> offsets
        # The new events from the newest back: an event whose key came already is replaced.
        for low, high in reversed(spans(sizes, compacted_to)):
            for chunk, offset, key in self._query(EVENT_KEYS, (topic_id, partition, low, high)):
                if key in seen:
                    replaced[chunk].append(offset)
                elif key is not None:
                    seen.add(key)
        # The events compacted before: only a new event can replace them.
        for low, high in spans([row for row in sizes if row[0] <= compacted_to], BEFORE_FIRST):
            for chunk, offset, key in self._query(EVENT_KEYS, (topic_id, partition, low, high)):
                if key in seen:
                    replaced[chunk].append(offset)
        in_replaced = [row for row in sizes if row[0] in replaced]
        for low, high in spans(in_replaced, BEFORE_FIRST, REWRITE_CHUNKS_AT_ONCE):
            self._rewrite(topic_id, partition, {chunk: offsets for chunk, offsets
                                                in replaced.items() if low < chunk <= high})
        where = {"topic_id": topic_id, "partition": partition}
        merges = merged_ranges(self._query(EMPTIED, (topic_id, partition, upto)))
        try:
            with self._pool.transaction() as cursor:
                # A merged chunk written after a deletion of the topic removed its chunks
                # would stay for good.
                cursor.execute(LOCK_TOPIC, (topic_id,))
                if cursor.fetchone() is not None:
                    for first, last in merges:
                        cursor.execute(MERGE_EMPTIED, {**where, "first": first, "last": last,
                                                       "payloads": "\n" * (last - first)})
                    cursor.execute(MARK_COMPACTED, (topic_id, partition, upto))
        except psycopg2.Error as error:
            raise log_error(error, self._storage_id) from error
        return sum(map(len, replaced.values()))

    def _rewrite(self, topic_id: int, partition: int, replaced: dict[int, list[int]]) -> None:
        """Empty the lines of the replaced offsets in their chunks (by last offset)."""
        last_offsets: list[int] = []
        rewritten: list[TextLiteral] = []
        for chunk, first, payloads in self._query(
                REPLACED_CHUNKS, (topic_id, partition, list(replaced)), text_as_bytes=True):
            lines = payloads.split(b"\n")
            for offset in replaced[chunk]:
                lines[offset - first] = b""
            last_offsets.append(chunk)
            rewritten.append(TextLiteral(b"\n".join(lines)))
        self._execute(REWRITE_CHUNKS, (last_offsets, rewritten, topic_id, partition))

    def _last_offset_before(self, topic_id: int, partition: int, cutoff: datetime
                            ) -> int | None:
        """The last offset of the newest chunk appended before ``cutoff``, if any."""
        rows = self._query(
            "SELECT min(last_offset), max(last_offset) FROM log_chunks"
            " WHERE topic_id = %s AND partition = %s", (topic_id, partition))
        low, high = rows[0]
        if low is None:
            return None
        found = None
        while low <= high:
            middle = (low + high) // 2
            # The first chunk ending at or after `middle` (chunks span several offsets).
            row = self._query(
                "SELECT last_offset, appended_at < %s FROM log_chunks"
                " WHERE topic_id = %s AND partition = %s AND last_offset >= %s"
                " ORDER BY last_offset LIMIT 1", (cutoff, topic_id, partition, middle))
            offset, expired = row[0]
            if expired:
                found, low = offset, offset + 1
            else:
                high = middle - 1
        return found

    def close(self) -> None:
        self._appender.close()
        self._watch.close()


def compacted_runs(partition: int, first: int, lines: list[bytes]) -> list[EventRun]:
    """The runs of a compacted chunk's lines from offset ``first``: empty lines are
    events compaction removed, gaps between runs."""
    runs = []
    start = 0
    for index, line in enumerate(lines):
        if not line:
            if index > start:
                runs.append(EventRun(partition, first + start, lines[start:index]))
            start = index + 1
    if start < len(lines):
        runs.append(EventRun(partition, first + start, lines[start:]))
    return runs


def spans(sizes: Sequence[tuple[int, int]], after: int, max_chunks: int | None = None
          ) -> list[tuple[int, int]]:
    """Ranges (low, high] of chunks' last offsets, of the chunks ending after ``after``,
    that hold at most COMPACTION_BYTES each (or one larger chunk) and ``max_chunks``
    chunks. ``sizes``: each chunk's last offset and size, in order."""
    ranges: list[tuple[int, int]] = []
    low, high, total, count = after, after, 0, 0
    for last, size in sizes:
        if last <= after:
            continue
        if high > low and (total + size > COMPACTION_BYTES or count == max_chunks):
            ranges.append((low, high))
            low, total, count = high, 0, 0
        high, total, count = last, total + size, count + 1
    if high > low:
        ranges.append((low, high))
    return ranges


def merged_ranges(chunks: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (first, last) offsets spanning consecutive chunks, of at most CHUNK_EVENTS
    offsets each, where more than one chunk would become one."""
    ranges: list[tuple[int, int, int]] = []  # first, last, chunks
    for first, last in chunks:
        if ranges and ranges[-1][1] + 1 == first and last - ranges[-1][0] < CHUNK_EVENTS:
            ranges[-1] = (ranges[-1][0], last, ranges[-1][2] + 1)
        else:
            ranges.append((first, last, 1))
    return [(first, last) for first, last, count in ranges if count > 1]


class PostgresReader:
    """Reads several partitions of one topic, round-robin so none starves.

    A read brings whole chunks; what a poll does not take waits for the next.
    While a partition has a backlog, the next read is sent as soon as one comes
    back, so the server reads while the stream sends: one stream from the start
    of 1M events went from 1.2-1.3M to 1.6-1.8M events/s. It holds one read more
    (the size of the last poll) and takes no connection more.

    Its waiter stays registered from the first poll to ``close``: once a read
    found nothing more, the reader queries again only when an append to the
    topic was heard of, so an idle reader costs the database nothing; one
    starting at the newest events that ``bounds`` just read (a stream from the
    end) skips even the first read. While appends cannot be heard of (the
    listening connection is down) it reads on every poll."""

    def __init__(self, engine: PostgresEngine, topic: str, positions: Mapping[int, int]) -> None:
        self._engine = engine
        self._topic_id = engine._topic_id(topic)
        self._positions = dict(positions)
        self._order = sorted(self._positions)
        self._closed = False
        self._appended: gevent.event.Event | None = None
        self._caught_up = False
        self._unserved: list[EventRun] = []  # read, in order, not yet polled
        self._ahead: gevent.Greenlet | None = None  # the read after ``_unserved``

    def poll(self, max_events: int, timeout: float) -> list[EventRun]:
        if self._closed or not self._order:
            return []
        if self._unserved:
            return self._serve(max_events)
        if self._appended is None:
            self._appended = self._engine._watch.waiter(self._topic_id)
            # A stream starting at the end, just read by ``bounds``, needs no first read.
            self._caught_up = self._engine._known_newest(self._topic_id, self._positions)
        clock = gevent.get_hub().loop
        deadline = clock.now() + timeout
        while True:
            listening = self._engine._watch.listening()
            if not self._caught_up or self._appended.is_set() or not listening:
                events = self._fetch(max_events)
                if events:
                    return events
            remaining = deadline - clock.now()
            if remaining <= 0:
                return []
            if not self._caught_up:
                continue  # it read only events compaction removed: more follow
            if listening:
                self._appended.wait(remaining)
            else:  # appends go unheard: look again after a while
                gevent.sleep(min(remaining, 1.0))

    def _fetch(self, max_events: int) -> list[EventRun]:
        ahead, self._ahead = self._ahead, None
        read = ahead.get() if ahead is not None else self._read(max_events)
        if isinstance(read, StorageError):
            raise read
        self._unserved, more = read
        # Only an empty read says so: a short one may have stopped at a purged prefix,
        # and one of chunks compaction emptied may have more after them.
        self._caught_up = not self._unserved and not more
        if more:
            # A backlog: the server reads on while these events are sent.
            self._ahead = gevent.spawn(self._read_ahead, max_events)
            gevent.sleep(0)  # it sends its query now
        return self._serve(max_events)

    def _read(self, max_events: int) -> tuple[list[EventRun], bool]:
        assert self._appended is not None
        self._appended.clear()  # before reading: an append from now on sets it again
        ordered = {p: self._positions[p] for p in self._order}
        read = self._engine._read_many(self._topic_id, ordered, max_events)
        self._positions.update(ordered)
        # The next read starts with the partition after the first one read now.
        self._order = self._order[1:] + self._order[:1]
        return read

    def _read_ahead(self, max_events: int) -> tuple[list[EventRun], bool] | StorageError:
        """``_read`` with its error returned, to be raised by the poll that takes it."""
        try:
            return self._read(max_events)
        except StorageError as error:
            return error

    def _serve(self, max_events: int) -> list[EventRun]:
        runs, self._unserved = split_runs(self._unserved, max_events)
        return runs

    def close(self) -> None:
        self._closed = True
        self._unserved = []
        self._ahead = None  # a read under way finishes, unread: cut short, it spoils its connection
        if self._appended is not None:
            self._engine._watch.forget(self._topic_id, self._appended)
            self._appended = None
