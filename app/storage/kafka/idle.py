"""``IdleReaders``: stream readers that closed their consumer, woken when events come.

A librdkafka consumer costs a worker ~600 KB and four native threads, and asks the
broker for new events ~50 times a second even when none come. A reader that found
nothing for a while gives its consumer up and waits here instead: one greenlet per
engine asks ListOffsets for the ends of every waiting reader's partitions in one
request, every ``CHECK_INTERVAL_S`` (less often when a round costs much: ``MAX_SHARE``),
and wakes the readers whose partitions have events past their position; they open
a consumer again.

A reader waits here only from a position that was the log end at some moment (a
fetch's high watermark, or the end ``bounds`` found). Everything appended since
then lies at or past that position, in record batches starting there or later,
so the reported end passes the position exactly when a new event is there: also on
Tansu, whose reported end is the first offset of the newest batch + 1.

A partition whose end cannot be had (no answer, a topic deleted by another process)
wakes no one: an outage ends the readers' polls (the engine wakes them all when
librdkafka reports the brokers down, and they raise), a deletion the streams (the
event type's deletion notice), and one in this process the readers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from time import thread_time
from typing import Protocol

import gevent
import gevent.event

from app.storage.engine import StorageError
from app.storage.kafka.threads import BlockingCalls
from app.storage.kafka.topics import Topics

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 0.1
"""How often the ends of idle readers' partitions are asked for: an idle stream's
first event comes this much later at most, plus a consumer's start (~10 ms)."""

CHECK_TIMEOUT_S = 5.0
"""How long one such request may take before the next round asks again."""

MAX_SHARE = 0.05
"""The most of the worker's CPU the rounds take: each waits at least (1 - MAX_SHARE) /
MAX_SHARE times as long as the one before cost its thread in CPU. confluent-kafka makes
a future per partition asked, ~18 us of the worker's CPU each: 200 partitions take
~3 ms a round, 2,000 ~40 ms, whose events are then seen up to ~0.8 s late. Waiting
for the broker's answer costs nothing: spaced by the wall time instead, a round that
waited out a frozen broker (5 s) put the next one off by 95 s, and every idle stream
of the worker with it, long after the broker was back."""


class IdleReader(Protocol):
    """What the watch needs of a reader: its topic and, per partition, the next offset."""

    topic: str

    @property
    def following(self) -> Mapping[int, int]: ...


class IdleReaders:
    """The engine's idle readers and the greenlet that watches their partitions' ends."""

    def __init__(self, topics: Topics, threads: BlockingCalls,
                 interval: float = CHECK_INTERVAL_S) -> None:
        self._topics = topics
        self._threads = threads
        self._interval = interval
        self._waiting: dict[IdleReader, gevent.event.AsyncResult[bool]] = {}
        self._watch: gevent.Greenlet[[], None] | None = None

    def wait(self, reader: IdleReader, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for events past the reader's positions: True
        when they are there (the reader is no longer watched), False when the time
        ran out or the reader left."""
        woken = self._waiting.get(reader)
        if woken is None:
            woken = self._waiting[reader] = gevent.event.AsyncResult()
        if self._watch is None:
            self._watch = gevent.spawn(self._run)
        woken.wait(timeout)
        return woken.ready() and woken.get() is True

    def leave(self, reader: IdleReader) -> None:
        """Stop watching for the reader; a wait of it returns False."""
        woken = self._waiting.pop(reader, None)
        if woken is not None:
            woken.set(False)

    def wake_all(self) -> None:
        """Have every waiting reader look again: its wait returns False (the brokers
        went down, and its poll ends on that; or the engine closes)."""
        for reader in list(self._waiting):
            self.leave(reader)

    def close(self) -> None:
        self.wake_all()
        if self._watch is not None:
            self._watch.kill(block=False)

    def _run(self) -> None:
        cost = 0.0
        try:
            while self._waiting:
                gevent.sleep(max(self._interval, cost * (1 - MAX_SHARE) / MAX_SHARE))
                cost = self._check()
        finally:
            self._watch = None

    def _check(self) -> float:
        """One round: the reported ends of every watched partition, in one request;
        returns the CPU it cost."""
        readers = list(self._waiting)
        asked = {(reader.topic, partition) for reader in readers for partition in reader.following}
        if not asked:
            return 0.0
        try:
            ends, cost = self._threads.run("idle stream readers", self._ends, asked)
        except StorageError as failure:  # the readers' own polls notice an outage
            log.debug("asking the ends of idle readers' partitions failed: %s", failure)
            return 0.0
        for reader in readers:
            woken = self._waiting.get(reader)
            if woken is None:  # it left during the request
                continue
            if any(isinstance(end := ends.get((reader.topic, partition)), int)
                   and end > following
                   for partition, following in reader.following.items()):
                del self._waiting[reader]
                woken.set(True)
        return cost

    def _ends(self, asked: set[tuple[str, int]]
              ) -> tuple[dict[tuple[str, int], int | Exception], float]:
        """(blocking) The partitions' reported ends, and the CPU time this thread spent
        asking: a broker slow to answer costs none."""
        started = thread_time()
        ends = self._topics.latest_offsets(asked, CHECK_TIMEOUT_S)
        return ends, thread_time() - started
