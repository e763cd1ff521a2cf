"""The low-level event stream: one greenlet (the request's) drives a storage
reader and writes ``EventStreamBatch`` lines.

Each partition has its own buffer and flush timer: a partition's batch goes out
when it holds ``batch_limit`` events, or when ``batch_flush_timeout`` passed
since that partition's last batch (then, if it holds nothing, as a keep-alive
with the partition's current cursor). The stream ends cleanly, pending events
flushed, as soon as ``stream_limit`` events are at hand, on ``stream_timeout``, after
``stream_keep_alive_limit`` keep-alives in a row on every partition, when the
event type is deleted, and when the worker shuts down. A client that goes away
is noticed within a second even when nothing is being written.
"""

from __future__ import annotations

import logging
import select
import socket
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import gevent

from app import lifecycle
from app.domain.timeline import Timeline
from app.storage.engine import StorageError, StoredEvent, StreamReader
from app.storage.offsets import encode_offset

CHECK_INTERVAL_S = 1.0
MAX_POLL_EVENTS = 5000
UNLIMITED = sys.maxsize

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamLimits:
    batch_limit: int = 1
    stream_limit: int = 0  # 0: unlimited
    batch_flush_timeout: float = 30.0
    stream_timeout: float = 3600.0
    stream_keep_alive_limit: int = 0  # 0: unlimited


def client_gone(connection: socket.socket | None) -> bool:
    """True when the client closed its side (the socket reads as end of file)."""
    if connection is None:
        return False
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class EventStream:
    """One stream's state: per-partition buffers, positions and timers."""

    def __init__(self, reader: StreamReader, timeline: Timeline, positions: dict[int, int],
                 limits: StreamLimits, connection: socket.socket | None = None,
                 still_exists: Callable[[], bool] = lambda: True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._reader = reader
        self._still_exists = still_exists
        self._timeline = timeline
        self._limits = limits
        self._connection = connection
        self._clock = clock
        self._positions = dict(positions)
        self._buffers: dict[int, list[bytes]] = {p: [] for p in positions}
        now = clock()
        self._flush_due = dict.fromkeys(positions, now + limits.batch_flush_timeout)
        self._keep_alives = dict.fromkeys(positions, 0)
        self._ends_at = now + limits.stream_timeout
        self._sent = 0

    def _line(self, partition: int, payloads: list[bytes]) -> bytes:
        offset = encode_offset(self._timeline.order, self._positions[partition])
        cursor = b'{"cursor":{"partition":"%d","offset":"%s"}' % (partition, offset.encode())
        if not payloads:
            return cursor + b"}\n"
        return cursor + b',"events":[' + b",".join(payloads) + b"]}\n"

    def _flush(self, partition: int, count: int) -> bytes:
        """A batch of the partition's first ``count`` buffered events (a keep-alive if 0)."""
        buffer = self._buffers[partition]
        payloads = buffer[:count]
        del buffer[:count]
        self._positions[partition] += len(payloads)
        self._sent += len(payloads)
        self._flush_due[partition] = self._clock() + self._limits.batch_flush_timeout
        self._keep_alives[partition] = 0 if payloads else self._keep_alives[partition] + 1
        return self._line(partition, payloads)

    def _room(self) -> int:
        """How many more events the stream may send."""
        if self._limits.stream_limit == 0:
            return UNLIMITED
        return self._limits.stream_limit - self._sent

    def _buffered(self) -> int:
        return sum(len(buffer) for buffer in self._buffers.values())

    def _take(self, events: list[StoredEvent]) -> None:
        for event in events:
            self._buffers[event.partition].append(event.payload)

    def _full_batches(self) -> Iterator[bytes]:
        limit = self._limits.batch_limit
        for partition, buffer in self._buffers.items():
            while len(buffer) >= limit and self._room() > 0:
                yield self._flush(partition, min(limit, self._room()))

    def _due_batches(self) -> Iterator[bytes]:
        now = self._clock()
        for partition, due in self._flush_due.items():
            if now >= due:
                yield self._flush(partition, min(len(self._buffers[partition]), self._room()))

    def _pending_batches(self) -> Iterator[bytes]:
        """Everything buffered, as the stream ends."""
        for partition, buffer in self._buffers.items():
            if buffer and self._room() > 0:
                yield self._flush(partition, min(len(buffer), self._room()))

    def _keep_alive_limit_reached(self) -> bool:
        limit = self._limits.stream_keep_alive_limit
        return limit > 0 and all(count >= limit for count in self._keep_alives.values())

    def lines(self) -> Iterator[bytes]:
        """The stream's lines, ending when a limit says so; closes the reader at the end."""
        try:
            yield from self._run()
        except StorageError as error:
            log.warning("stream of %s ended by the storage: %s", self._timeline.event_type, error)
        finally:
            self._reader.close()

    def _run(self) -> Iterator[bytes]:
        while True:
            now = self._clock()
            if now >= self._ends_at or lifecycle.is_shutting_down():
                yield from self._pending_batches()
                return
            next_due = min(min(self._flush_due.values()), self._ends_at, now + CHECK_INTERVAL_S)
            wait = max(0.0, next_due - now)
            capacity = self._room() - self._buffered()
            if capacity > 0:
                self._take(self._reader.poll(min(capacity, MAX_POLL_EVENTS), wait))
            else:  # full until a batch is due: only time can change that
                gevent.sleep(wait)
            yield from self._full_batches()
            if self._limits.stream_limit and self._sent + self._buffered() >= \
                    self._limits.stream_limit:
                # Nothing more can join the pending batches: send them and end now.
                yield from self._pending_batches()
                return
            yield from self._due_batches()
            if (self._keep_alive_limit_reached() or client_gone(self._connection)
                    or not self._still_exists()):
                return


def gzipped(lines: Iterator[bytes]) -> Iterator[bytes]:
    """The lines gzip-compressed, each flushed so the client can read it at once."""
    compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        for line in lines:
            yield compressor.compress(line) + compressor.flush(zlib.Z_SYNC_FLUSH)
        yield compressor.flush(zlib.Z_FINISH)
    finally:
        lines.close()
