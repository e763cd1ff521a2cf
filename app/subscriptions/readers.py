"""Reading a subscription stream's partitions, across event types and storages.

Each event type the stream reads has its own storage reader, polled by its own
greenlet (so a wait on one storage never delays another) into one inbox, a poll's
events at a time. The stream takes events from the inbox only as far as its
limits allow; readers poll while the inbox holds less than the stream asked for
plus ``read_ahead``, so when a commit frees room the next events are at hand
at once, and a paused stream (``max_uncommitted_events`` reached) holds at most
``read_ahead`` events it has not sent, besides what is left of the chunks a
postgres reader read last (up to 1,000 events a partition). Whatever the
window, the inbox holds at most ``MAX_INBOX_EVENTS``: a client that asks for a
huge ``max_uncommitted_events`` and stops reading must not make the worker read
its partitions into memory.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping

import gevent
import gevent.event

from app.domain.topology import PartitionKey
from app.storage.across_timelines import NO_WATCH, SwitchWatch, TimelinesReader
from app.storage.engine import EventRun, StorageEngine, StorageError, count_events, split_runs
from app.subscriptions.partitions import SubscriptionPartitions

POLL_WAIT_S = 1.0
MAX_POLL_EVENTS = 20_000
"""Also the largest read-ahead. With polls of 5,000 a postgres stream committing every
batch of 100 at a window of 20,000 ran at 59-72% of the low-level stream, with polls
of 20,000 at 67-83% (fewer, larger turns, and so fewer commits)."""
FIRST_POLL_EVENTS = 5_000
"""A reader's first poll asks for no more: the stream's first events, and those of
partitions a rebalance gives it, wait for that read, and PostgreSQL reads 20,000
events in ~10 ms, 5,000 in ~3 ms. The read-ahead takes over from the second poll."""
MAX_INBOX_EVENTS = 25_000
"""5-10 MB of events of 200-400 bytes as stored: more than a stream sends in a turn at a
window of 20,000 plus the read-ahead."""

log = logging.getLogger(__name__)


class Inbox:
    """Events read and not yet taken by the stream: (event type, runs of one poll)."""

    def __init__(self) -> None:
        self._polls: deque[tuple[str, list[EventRun]]] = deque()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def put(self, event_type: str, runs: list[EventRun]) -> None:
        self._polls.append((event_type, runs))
        self._size += count_events(runs)

    def take(self, count: int) -> list[tuple[str, list[EventRun]]]:
        """Up to ``count`` of the oldest events, in the order they were read."""
        taken = []
        while self._polls and count > 0:
            event_type, runs = self._polls[0]
            runs, rest = split_runs(runs, count)
            if rest:
                self._polls[0] = (event_type, rest)
            else:
                self._polls.popleft()
            taken.append((event_type, runs))
            events = count_events(runs)
            self._size -= events
            count -= events
        return taken

    def clear(self) -> None:
        self._polls.clear()
        self._size = 0

    def drop(self, event_type: str) -> None:
        """Forget the events of an event type whose reader stopped: its next reader
        reads them again from where the stream is."""
        kept = deque((name, runs) for name, runs in self._polls if name != event_type)
        self._size = sum(count_events(runs) for _, runs in kept)
        self._polls = kept


class _Pump:
    """One event type's reader, polled by a greenlet of its own until stopped."""

    def __init__(self, reader: TimelinesReader, partitions: frozenset[int]) -> None:
        self.reader = reader
        self.partitions = partitions
        self.stopped = False


class PartitionReaders:
    """The readers of one stream; ``wake`` is set when an error arrives, and when events
    arrive while the stream can take some. A stream paused at its window is woken by
    the commit that frees room, not by every poll of the read-ahead (a kafka reader's
    polls bring ~1,000 events each: ten turns for nothing per commit at a window of
    20,000).

    A reader is never interrupted in the middle of a poll (a PostgreSQL query cut
    short spoils its connection): a stopped pump finishes its poll, drops what
    it got and closes its reader itself, within ``POLL_WAIT_S``."""

    def __init__(self, partitions: SubscriptionPartitions,
                 engine_for: Callable[[str], StorageEngine], wake: gevent.event.Event,
                 read_ahead: int = 0,
                 switch_watch: Callable[[str], SwitchWatch] | None = None) -> None:
        self._partitions = partitions
        self._engine_for = engine_for
        self._switch_watch = switch_watch  # by event type
        self._wake = wake
        self._read_ahead = min(read_ahead, MAX_POLL_EVENTS)
        self.inbox = Inbox()
        self.error: StorageError | None = None
        self._wanted = 0
        self._takes = True  # whether the stream can take events now
        self._demand = gevent.event.Event()
        self._pumps: dict[str, _Pump] = {}

    def want(self, count: int, most: int) -> None:
        """How many events the stream could take now (``count``), and at most over the
        rest of its life (``most``: what ``stream_limit`` leaves); readers poll up to
        ``count`` plus the read-ahead, never beyond ``most`` nor ``MAX_INBOX_EVENTS``."""
        self._wanted = min(max(0, count) + self._read_ahead, max(0, most), MAX_INBOX_EVENTS)
        self._takes = count > 0
        if self._wanted - len(self.inbox) > 0:
            self._demand.set()

    def read(self, positions: Mapping[PartitionKey, int]) -> None:
        """Read exactly these partitions, each after its position. Readers of event
        types whose partitions did not change keep going."""
        by_type: dict[str, dict[int, int]] = {}
        for (event_type, partition), position in positions.items():
            by_type.setdefault(event_type, {})[int(partition)] = position
        for event_type in list(self._pumps):
            if frozenset(by_type.get(event_type, ())) != self._pumps[event_type].partitions:
                self._stop(event_type)
        for event_type, wanted in by_type.items():
            if event_type not in self._pumps:
                self._start(event_type, wanted)

    def close(self) -> None:
        """Stop every reader, without waiting: each finishes the poll it is in (within
        ``POLL_WAIT_S``), drops what it got and closes itself. Waiting here would hold
        the end of the stream, and the client's connection, for that poll. (An engine
        deleting a topic closes its readers of it first, stopped or not.)"""
        for event_type in list(self._pumps):
            self._stop(event_type)
        self.inbox.clear()

    def _start(self, event_type: str, positions: dict[int, int]) -> None:
        partitions = self._partitions
        watch = self._switch_watch(event_type) if self._switch_watch is not None else NO_WATCH
        reader = TimelinesReader(self._engine_for, partitions.current(event_type), positions,
                                 watch)
        pump = self._pumps[event_type] = _Pump(reader, frozenset(positions))
        gevent.spawn(self._pump, event_type, pump)

    def _stop(self, event_type: str) -> None:
        self._pumps.pop(event_type).stopped = True
        # Its runs may lie past a position the stream went back to (a hand-over called
        # off): taken, they would look like events after a gap.
        self.inbox.drop(event_type)
        self._demand.set()  # a pump waiting for demand sees it is stopped

    def _pump(self, event_type: str, pump: _Pump) -> None:
        most = FIRST_POLL_EVENTS
        try:
            while not pump.stopped:
                room = self._wanted - len(self.inbox)
                if room <= 0:
                    self._demand.clear()
                    if not self._demand.wait(POLL_WAIT_S):
                        pump.reader.follow()  # paused: still leave cleaned-up timelines
                    continue
                runs = pump.reader.poll(min(room, most), POLL_WAIT_S)
                most = MAX_POLL_EVENTS
                if runs and not pump.stopped:
                    self.inbox.put(event_type, runs)
                    if self._takes:
                        self._wake.set()
                    # Make way: a poll that found its events fetched already (kafka)
                    # never waits, and the stream sends only while the pump waits.
                    gevent.sleep(0)
        except StorageError as error:
            if not pump.stopped:
                self.error = error
                self._wake.set()
        finally:
            try:
                pump.reader.close()
            except StorageError as error:
                log.warning("closing the reader of %s failed: %s", event_type, error)
