"""``KafkaStreamReader``: several partitions of one topic through one assigned consumer.

A consumer asked for offsets that no longer exist restarts at the oldest one;
events at or before the asked position are filtered out. A reader that found
nothing for ``IDLE_AFTER_S`` closes its consumer and waits in the engine's
``IdleReaders`` until events come, then opens a new one where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from time import monotonic

import gevent.event
import gevent.monkey
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from app.storage.engine import EventRun, StorageError, TopicNotFound, count_events
from app.storage.kafka.clients import DRAIN_BATCH, raise_unless_end, storage_error
from app.storage.kafka.idle import IdleReaders
from app.storage.kafka.threads import BlockingCalls, Outcome, Returned, unwrap

WAIT_SLICE_S = 0.5
"""The longest a reader waits in one pool thread, so that closing it never waits long."""

IDLE_AFTER_S = 5.0
"""How long a reader finds nothing before it gives its consumer up."""

# A lock that works across native threads whether or not threading is monkey-patched.
_allocate_native_lock = gevent.monkey.get_original("_thread", "allocate_lock")

OpenConsumer = Callable[[Mapping[int, int]], Consumer]
"""Makes a consumer reading the given partitions from the given offsets (blocking)."""


class KafkaStreamReader:
    """Reads several partitions of one topic through its own assigned consumer, or,
    while idle, through none.

    Only one thing touches the consumer at a time: the hub drains what is
    already fetched (never waits) while no pool thread waits on it, and the
    pool threads that wait or close take ``_lock``. ``on_close`` runs once,
    when the reader closes; ``raise_if_down`` ends a poll that would wait on
    brokers known to be down. Without ``consumer`` the reader starts idle: its
    positions must be the ends of their partitions at some moment."""

    def __init__(
        self,
        threads: BlockingCalls,
        open_consumer: OpenConsumer,
        consumer: Consumer | None,
        topic: str,
        positions: Mapping[int, int],
        idle: IdleReaders,
        on_close: Callable[[KafkaStreamReader], None],
        raise_if_down: Callable[[], None] = lambda: None,
        idle_after: float = IDLE_AFTER_S,
    ) -> None:
        self._threads = threads
        self._open_consumer = open_consumer
        self._consumer = consumer
        self.topic = topic
        self._next = {partition: after + 1 for partition, after in positions.items()}
        self._idle = idle
        self._idle_after = idle_after
        self._on_close = on_close
        self._raise_if_down = raise_if_down
        self._lock = _allocate_native_lock()
        self._waiting: gevent.event.AsyncResult[Outcome[list[Message]]] | None = None
        self._opening: gevent.event.AsyncResult[Outcome[Consumer]] | None = None
        self._found_at = monotonic()  # when a poll last found events
        self._closed = False
        self._deleted = False

    @property
    def following(self) -> Mapping[int, int]:
        """Per partition, the offset of the next event to read."""
        return self._next

    @property
    def idle(self) -> bool:
        """Whether the reader holds no consumer now."""
        return self._consumer is None

    def poll(self, max_events: int, timeout: float) -> list[EventRun]:
        if max_events <= 0:
            return []
        deadline = monotonic() + timeout
        while True:
            if self._closed:
                raise self._closed_error()
            if self._consumer is None:
                if not self._wake(deadline):
                    return []
                continue
            if self._waiting is None:
                events = self._drain(max_events)
                now = monotonic()
                if events:
                    self._found_at = now
                    return events
                remaining = deadline - now
                if remaining <= 0:
                    return events
                self._raise_if_down()  # nothing more will come: end the stream now
                if now - self._found_at >= self._idle_after and self._at_ends(self._consumer):
                    self._give_up_consumer()
                    continue
                self._waiting = self._threads.spawn(
                    self._wait_for_one, self._consumer, min(remaining, WAIT_SLICE_S)
                )
            # An interrupted poll (timeout, kill) leaves the wait for the next call,
            # so a message it brings back is not lost.
            waiting = self._waiting
            outcome = waiting.get()
            self._waiting = None
            if self._closed:
                raise self._closed_error()
            try:
                events = self._take(unwrap(outcome))
            except KafkaException as error:
                raise storage_error(error, self.topic, self._threads.storage) from error
            if events:
                self._found_at = monotonic()
                return events + self._drain(max_events - count_events(events))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._waiting = None
        self._on_close(self)
        self._idle.leave(self)
        if self._opening is not None:  # a poll opens one, or was interrupted doing so
            outcome = self._opening.get()
            self._opening = None
            if isinstance(outcome, Returned):
                self._consumer = outcome.value
        self._give_up_consumer()

    def topic_deleted(self) -> None:
        """Close the reader because its topic is being deleted; polls raise ``TopicNotFound``."""
        self._deleted = True
        self.close()

    def _closed_error(self) -> StorageError:
        if self._deleted:
            return TopicNotFound(f"{self.topic}: the topic was deleted")
        return StorageError(f"{self.topic}: the reader is closed")

    def _wake(self, deadline: float) -> bool:
        """While idle: wait until events come, then open a consumer at the reader's
        positions. False when the deadline passed first."""
        if self._opening is None:
            remaining = deadline - monotonic()
            if remaining <= 0:
                return False
            self._raise_if_down()
            if not self._idle.wait(self, remaining):
                return True  # look again: closed, the brokers down, or the deadline
            self._opening = self._threads.spawn(self._open_consumer, dict(self._next))
        # An interrupted open leaves its consumer to the next poll, or to close.
        outcome = self._opening.get()
        if self._closed:  # close took the consumer
            raise self._closed_error()
        self._opening = None
        try:
            self._consumer = unwrap(outcome)
        except KafkaException as error:
            raise storage_error(error, self.topic, self._threads.storage) from error
        self._found_at = monotonic()
        return True

    def _at_ends(self, consumer: Consumer) -> bool:
        """Whether the consumer's latest fetches put every partition's end at the
        reader's position: nothing is there to read, and the position is an end."""
        return all(
            consumer.get_watermark_offsets(TopicPartition(self.topic, partition),
                                           cached=True)[1] == following
            for partition, following in self._next.items())

    def _give_up_consumer(self) -> None:
        """Close the consumer, if any (what it fetched is read again by the next one),
        and go idle."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            unwrap(self._threads.spawn(self._close_consumer, consumer).get())

    def _drain(self, max_events: int) -> list[EventRun]:
        """What the consumer has already fetched, without waiting."""
        if max_events <= 0 or self._consumer is None:
            return []
        try:
            return self._take(self._consumer.consume(min(max_events, DRAIN_BATCH), 0))
        except KafkaException as error:
            raise storage_error(error, self.topic, self._threads.storage) from error

    def _wait_for_one(self, consumer: Consumer, timeout: float) -> list[Message]:
        with self._lock:
            if self._closed:
                return []
            return consumer.consume(1, timeout)

    def _close_consumer(self, consumer: Consumer) -> None:
        with self._lock:
            consumer.close()

    def _take(self, messages: Iterable[Message]) -> list[EventRun]:
        return take_runs(messages, self._next, self.topic, self._threads.storage)


def take_runs(messages: Iterable[Message], following: dict[int, int], topic: str,
              storage: str) -> list[EventRun]:
    """The records among consumed ``messages`` as runs of consecutive offsets, skipping
    any before ``following[partition]`` (a consumer restarted earlier), which it moves
    past what it takes. One plain loop: at ~1.5M events/s it is a tenth of a kafka
    stream's CPU, and the generator and tuple per record it replaced cost another."""
    runs: list[EventRun] = []
    partition = -1  # of the run being built
    expected = -1  # the offset that continues it; a record's offset is never -1
    payloads: list[bytes] = []
    add = payloads.append
    for message in messages:
        error = message.error()
        if error is not None:
            raise_unless_end(error, topic, storage)
            continue
        offset: int = message.offset()  # type: ignore[assignment]
        if offset == expected and message.partition() == partition:
            add(message.value() or b"")
            expected += 1
            continue
        if partition >= 0:
            following[partition] = expected
        partition = message.partition()  # type: ignore[assignment]
        if offset < following[partition]:
            partition = expected = -1
            continue
        payloads = [message.value() or b""]
        runs.append(EventRun(partition, offset, payloads))
        add = payloads.append
        expected = offset + 1
    if partition >= 0:
        following[partition] = expected
    return runs
