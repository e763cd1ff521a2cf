"""The low-level event stream of one event type: the request's greenlet drives a
storage reader and writes ``EventStreamBatch`` lines.

The stream ends cleanly, pending events flushed, as soon as ``stream_limit``
events are at hand, on ``stream_timeout``, after ``stream_keep_alive_limit``
keep-alives in a row on every partition, when the event type is deleted, and
when the worker shuts down. A client that goes away is noticed within a second
even when nothing is being written. When the storage fails, the events at hand
are sent, then a last line whose ``info.debug`` says why the stream ends.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence

import gevent
from kazoo.client import KazooClient

from app import lifecycle
from app.coordination.stream_slots import StreamSlots, claim_slots
from app.cursors import client_cursor
from app.dependencies import DependencyUnavailable
from app.domain.timeline import Timelines
from app.storage.across_timelines import EngineFor, SwitchWatch, TimelinesReader
from app.storage.engine import StorageError, StreamReader
from app.streaming.batcher import Batch, Batcher
from app.streaming.connection import client_gone
from app.streaming.limits import StreamLimits
from app.streaming.lines import batch_line, joined
from app.streaming.positions import TakenPositions

CHECK_INTERVAL_S = 1.0
MAX_POLL_EVENTS = 5000

log = logging.getLogger(__name__)


class EventStream:
    """One low-level stream: its reader, batcher and the position of each partition."""

    def __init__(self, reader: StreamReader, timeline: Timelines, positions: dict[int, int],
                 limits: StreamLimits, connection: socket.socket | None = None,
                 still_exists: Callable[[], bool] = lambda: True,
                 clock: Callable[[], float] = time.monotonic,
                 current: Callable[[], Timelines | None] = lambda: None,
                 on_batch: Callable[[str, int, int], None] = lambda *_: None) -> None:
        self._reader = reader
        self._on_batch = on_batch  # (event type, events, bytes) of each line sent
        self._still_exists = still_exists
        self._timeline = timeline
        self._current = current
        self._connection = connection
        self._clock = clock
        self._positions = TakenPositions(positions)
        self._batcher: Batcher[int] = Batcher(limits, positions, clock)
        self._ends_at = clock() + limits.stream_timeout

    def _line(self, partition: int, payloads: Sequence[bytes], event_type: str) -> bytes:
        position = self._positions.send(partition, len(payloads))
        cursor = client_cursor(self._timeline, partition, position)
        line = batch_line(cursor, payloads)
        self._on_batch(event_type, len(payloads), len(line))
        return line

    def time_left(self) -> float:
        """Seconds until ``stream_timeout``, which ends the stream also while a write
        waits on a client that stopped reading."""
        return self._ends_at - self._clock()

    def lines(self) -> Generator[bytes, None, None]:
        """The stream's lines, ending when a limit says so; closes the reader at the end."""
        try:
            yield from self._run()
        except (StorageError, DependencyUnavailable) as error:
            log.warning("stream of %s ended: %s", self._timeline.event_type, error)
            yield from self._lines(self._batcher.pending_batches())
            partition = min(self._positions.sent)
            cursor = client_cursor(self._timeline, partition, self._positions.sent[partition])
            yield batch_line(cursor, [], {"debug": f"the stream ends: {error}"})
        finally:
            self._reader.close()

    def _run(self) -> Iterator[bytes]:
        """Each turn's lines go out as one chunk (``joined``): batches made in one turn
        are ready at the same moment, and a write per line cost more than the line."""
        batcher = self._batcher
        while True:
            now = self._clock()
            if now >= self._ends_at or lifecycle.is_shutting_down():
                yield from joined(self._lines(batcher.pending_batches()))
                return
            wait = max(0.0, min(batcher.next_due(), self._ends_at, now + CHECK_INTERVAL_S) - now)
            capacity = batcher.room() - batcher.buffered()
            if capacity > 0:
                for run in self._reader.poll(min(capacity, MAX_POLL_EVENTS), wait):
                    self._positions.take(run.partition, run.first, len(run.payloads))
                    batcher.take(run.partition, run.payloads)
            else:  # full until a batch is due: only time can change that
                gevent.sleep(wait)
            lines = list(self._lines(batcher.full_batches()))
            if batcher.stream_limit_reached():
                yield from joined(lines, self._lines(batcher.pending_batches()))
                return
            yield from joined(lines, self._lines(batcher.due_batches()))
            if (batcher.keep_alive_limit_reached() or client_gone(self._connection)
                    or not self._still_exists()):
                return

    def _lines(self, batches: Iterable[Batch[int]]) -> Iterator[bytes]:
        # Offsets of a newer timeline: the reader reads one only once ``current`` gave
        # it, so asking here, after the read and before the lines, is soon enough.
        self._timeline = self._current() or self._timeline
        event_type = self._timeline.event_type
        for partition, payloads in batches:
            yield self._line(partition, payloads, event_type)


def open_event_stream(zookeeper: KazooClient, engine_for: EngineFor, timelines: Timelines,
                      watch: SwitchWatch, positions: dict[int, int], limits: StreamLimits,
                      max_streams_per_partition: int, connection: socket.socket | None,
                      still_exists: Callable[[], bool],
                      on_batch: Callable[[str, int, int], None] = lambda *_: None
                      ) -> tuple[EventStream, StreamSlots]:
    """A stream of the partitions in ``positions``, reading after each position through
    every timeline (``watch`` gives the newest ones and keeps out events published
    past a switch's recorded end), with a slot taken on each partition
    (``TooManyStreams`` when one has none free). The caller releases the slots when
    the stream ends."""
    slots = claim_slots(zookeeper, timelines.event_type, sorted(positions),
                        max_streams_per_partition)
    try:
        reader = TimelinesReader(engine_for, timelines, positions, watch)
    except BaseException:
        slots.release()
        raise
    return EventStream(reader, timelines, positions, limits, connection, still_exists,
                       current=watch.current, on_batch=on_batch), slots
