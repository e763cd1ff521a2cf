"""The narrow interface every event-storage engine implements.

Offsets here are engine-level integers: the first event of a partition has
offset 0 and every append takes the next ones, without gaps. Clients never see
these numbers directly; ``app.storage.offsets`` turns them into the opaque,
timeline-carrying strings of the API.

Every method may be called from any greenlet: engines keep blocking work
(librdkafka waits, PostgreSQL queries) off the gevent hub.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from time import monotonic
from typing import NamedTuple, Protocol, overload

from app.dependencies import DependencyUnavailable

BEFORE_FIRST = -1
"""The position before the first event of a partition: reading after it starts at offset 0."""

READ_TIMEOUT_S = 30.0
"""How long ``read`` waits for events that ``bounds`` reported before it gives up."""


class StorageError(Exception):
    """The storage could not do what was asked (unreachable, rejected, timed out)."""


class StorageUnavailable(DependencyUnavailable, StorageError):
    """The storage is down or unreachable: an outage (503), not a refusal."""


class TopicNotFound(StorageError):
    """The topic does not exist in this storage."""


class StoredEvent(NamedTuple):
    """One event as stored: its partition, its offset and its payload bytes."""

    partition: int
    offset: int
    payload: bytes


Keys = Mapping[int, Sequence[bytes]]
"""Per partition, the compaction key of each event appended (a compacted topic's)."""


class Lines(Sequence[bytes]):
    """The payloads of ``count`` consecutive events kept as the one ``bytes`` a storage
    holds them in, a line each: split into events only where a caller takes them apart.
    Streams send them whole: on ~400-byte events, splitting a chunk cost ~300 ns an
    event, more than everything else a postgres stream does with it.

    With the line ends of the chunk they come from (``ends``: each line's end counted
    in payload bytes, line breaks not counted; the lines are ``ends[first:]``), a slice
    is a window of the text, one copy and no split: a batch of 100 events cut out of a
    1,000-event chunk cost ~46 us a chunk against ~335 split (``line_ends``)."""

    __slots__ = ("_count", "_first", "data", "ends")

    def __init__(self, data: bytes, count: int, ends: Sequence[int] | None = None,
                 first: int = 0) -> None:
        if count < 1:
            raise ValueError("lines hold one event at least")
        self.data = data
        self._count = count
        self.ends = ends
        self._first = first

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            if (start, stop, step) == (0, self._count, 1):
                return self
            if self.ends is not None and step == 1:
                return self._window(start, stop) if start < stop else []
        elif self.ends is not None and -self._count <= index < self._count:
            start = index % self._count
            return self._window(start, start + 1).data
        return self.data.split(b"\n")[index]

    def _window(self, start: int, stop: int) -> Lines:
        """Lines ``start`` to ``stop`` (0 <= start < stop <= count) as lines of their own."""
        assert self.ends is not None
        base = self._line_start(self._first)
        first, last = self._first + start, self._first + stop - 1
        return Lines(self.data[self._line_start(first) - base:self.ends[last] + last - base],
                     stop - start, self.ends, first)

    def _line_start(self, line: int) -> int:
        """Where line ``line`` of the chunk starts in the chunk's text."""
        assert self.ends is not None
        return self.ends[line - 1] + line if line else 0

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.data.split(b"\n"))

    def __repr__(self) -> str:
        return f"Lines({self.data!r}, {self._count})"

    def payload_bytes(self) -> int:
        """The size of the payloads, line breaks not counted."""
        return len(self.data) - self._count + 1


def sliceable(payloads: Sequence[bytes]) -> Sequence[bytes]:
    """``payloads`` as a sequence whose slices split nothing more: itself, unless it is
    ``Lines`` without line ends, split here once for all its slices."""
    if type(payloads) is Lines and payloads.ends is None:  # not isinstance: ~1 us
        return list(payloads)
    return payloads


def line_ends(payloads: Iterable[bytes]) -> bytes:
    """The line ends of a chunk of these payloads, as storages keep them beside it:
    each payload's end counted in payload bytes, as little-endian 32-bit integers."""
    ends = array("I", accumulate(map(len, payloads)))
    if sys.byteorder == "big":
        ends.byteswap()
    return ends.tobytes()


def read_line_ends(stored: bytes | memoryview | None, data: bytes, count: int
                   ) -> Sequence[int] | None:
    """The line ends ``line_ends`` gave for a chunk of ``count`` payloads held as
    ``data``; None when none were stored or they do not fit the chunk (then its lines
    are split, as before the chunks had them)."""
    if stored is None or len(stored) != 4 * count:
        return None
    ends = array("I")
    ends.frombytes(stored)
    if sys.byteorder == "big":
        ends.byteswap()
    if ends[-1] + count - 1 != len(data):
        return None
    return ends


class EventRun(NamedTuple):
    """Events of one partition at consecutive offsets, as readers give them: the offset
    of the first and the payloads. Streams take events a run at a time, so what they
    cost per event is the payload alone."""

    partition: int
    first: int
    payloads: Sequence[bytes]

    @property
    def last(self) -> int:
        return self.first + len(self.payloads) - 1


def count_events(runs: Iterable[EventRun]) -> int:
    return sum(len(run.payloads) for run in runs)


def split_runs(runs: list[EventRun], count: int) -> tuple[list[EventRun], list[EventRun]]:
    """The first ``count`` events of the runs, and the rest, both as runs in order."""
    taken: list[EventRun] = []
    for index, run in enumerate(runs):
        if count <= 0:
            return taken, runs[index:]
        if len(run.payloads) > count:
            payloads = sliceable(run.payloads)  # split once, if at all, for both halves
            head = EventRun(run.partition, run.first, payloads[:count])
            tail = EventRun(run.partition, run.first + count, payloads[count:])
            return [*taken, head], [tail, *runs[index + 1:]]
        taken.append(run)
        count -= len(run.payloads)
    return taken, []


def stored_events(runs: Iterable[EventRun]) -> list[StoredEvent]:
    """The runs' events one by one, for callers that look at a few."""
    return [StoredEvent(run.partition, run.first + index, payload)
            for run in runs for index, payload in enumerate(run.payloads)]


@dataclass(frozen=True)
class PartitionBounds:
    """The available range of one partition.

    ``oldest`` is the offset of the oldest event still available and ``newest``
    the offset of the newest one. An empty partition has ``newest == oldest - 1``
    (for a partition that never held anything: oldest 0, newest -1).
    """

    partition: int
    oldest: int
    newest: int


class StreamReader(Protocol):
    """Reads events from several partitions of one topic, each after a position."""

    def poll(self, max_events: int, timeout: float) -> list[EventRun]:
        """Return up to ``max_events`` new events in runs, waiting up to ``timeout``
        seconds for the first one. Returns an empty list when nothing arrived in time.
        Events of one partition come in offset order; each call continues where
        the previous one stopped."""
        ...

    def close(self) -> None:
        """Release the reader's resources; safe to call twice."""
        ...


class StorageEngine(ABC):
    """One storage backend (``storage_type``) holding many topics."""

    storage_type: str

    @abstractmethod
    def create_topic(self, topic: str, partitions: int, retention_ms: int,
                     compacted: bool = False) -> None:
        """Create ``topic`` with ``partitions`` partitions numbered from 0, removing
        events older than ``retention_ms`` (none by age: ``KEEP_FOREVER``); a
        ``compacted`` one keeps the newest event of each key, where the storage
        compacts (Kafka; appends then give every event's key)."""

    @abstractmethod
    def set_retention(self, topic: str, retention_ms: int) -> None:
        """Keep the topic's events ``retention_ms`` from now on (an event type's
        ``options.retention_time`` changed); a missing topic is not an error."""

    @abstractmethod
    def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` and all its events; deleting a missing topic is not an error."""

    def append(self, topic: str, partition: int, payloads: Sequence[bytes]) -> list[int]:
        """Append ``payloads`` to one partition, in order, and return their offsets.

        Returns only once every event is durably acknowledged; raises
        ``StorageError`` when that cannot be confirmed."""
        if not payloads:
            return []
        result = self.append_many(topic, {partition: payloads})[partition]
        if isinstance(result, StorageError):
            raise result
        return result

    @abstractmethod
    def append_many(
        self, topic: str, batches: Mapping[int, Sequence[bytes]], keys: Keys | None = None
    ) -> dict[int, list[int] | StorageError]:
        """Append to several partitions at once; for each partition, its offsets
        or the error that kept it from being stored. Same durability as ``append``.
        ``keys`` gives each event's compaction key, in the order of ``batches``, for
        storages that compact. A missing topic raises ``TopicNotFound``."""

    def read(
        self, topic: str, partition: int, after: int, limit: int, wait: float = 0.0
    ) -> list[StoredEvent]:
        """Return up to ``limit`` events with offsets greater than ``after``.

        When none is available yet and ``wait`` > 0, wait up to ``wait``
        seconds for one to be appended. Built once on ``bounds`` and ``reader``
        for every engine: tests and benchmarks read this way, the API streams."""
        if limit <= 0:
            return []
        deadline = monotonic() + wait
        available = self._partition_bounds(topic, partition)
        reader = self.reader(topic, {partition: after})
        try:
            events: list[StoredEvent] = []
            while len(events) < limit:
                last = events[-1].offset if events else after
                if max(last + 1, available.oldest) > available.newest:
                    # Everything that was there is read: wait only if nothing was.
                    remaining = deadline - monotonic()
                    if events or remaining <= 0:
                        break
                    return stored_events(reader.poll(limit, remaining))
                batch = stored_events(reader.poll(limit - len(events), READ_TIMEOUT_S))
                if not batch:
                    raise StorageError(
                        f"{topic}/{partition}: events up to offset {available.newest}"
                        f" did not arrive within {READ_TIMEOUT_S:g} s")
                events += batch
            return events
        finally:
            reader.close()

    def _partition_bounds(self, topic: str, partition: int) -> PartitionBounds:
        for bounds in self.bounds(topic):
            if bounds.partition == partition:
                return bounds
        raise StorageError(f"{topic}: there is no partition {partition}")

    @abstractmethod
    def bounds(self, topic: str) -> list[PartitionBounds]:
        """The oldest and newest available offset of every partition, by partition."""

    def newest_at_least(self, topic: str) -> dict[int, int]:
        """Per partition, an offset never past its newest (-1 when nothing is known):
        its newest where that is as cheap as anything else, else a lower bound a
        storage gives for less than ``bounds``."""
        return {available.partition: available.newest for available in self.bounds(topic)}

    @abstractmethod
    def reader(self, topic: str, positions: Mapping[int, int]) -> StreamReader:
        """A reader over the given partitions, each starting after its position."""

    def purge_expired(self) -> int:
        """Remove the events past their topic's retention time; returns how many.

        One process at a time calls it (``workers/retention.py``). Engines whose
        storage enforces retention itself (Kafka) have nothing to do."""
        return 0

    def compact(self, every_s: float) -> int:
        """Remove the events of compacted topics that a later event of the same key
        replaced, each partition at most once every ``every_s`` seconds; returns how
        many. One process at a time calls it; engines whose storage compacts itself
        (Kafka) have nothing to do."""
        return 0

    def warm_up(self) -> None:
        """Start, without waiting for it, what a first append would otherwise wait for
        (a Kafka producer's connection and id take half a second). Nothing by default."""
        return None

    def raise_if_known_down(self) -> None:
        """``StorageUnavailable`` when the storage is known to be down, without asking
        it: what a stream checks before its 200. Nothing by default."""
        return None

    @abstractmethod
    def check(self) -> None:
        """Raise ``StorageError`` when the storage does not answer."""

    @abstractmethod
    def close(self) -> None:
        """Release connections, producers and threads held by this engine."""
