"""Appends: one idempotent producer per engine, and the thread serving its delivery reports.

An append produces its whole batch and then waits for all delivery reports
(producing one event at a time and waiting for each is many times slower).
The reports run on a dedicated poll thread; the last report of an append wakes
its greenlet through the hub's thread-safe callback queue.

An append that is not acknowledged in time, a fatal producer error, or a report
that every broker is down retires the producer: the next append starts a new
one. An idempotent producer keeps a producer id and sequence numbers that a
restarted broker may no longer know (Tansu keeps none across restarts), and
would otherwise never be acknowledged again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from time import monotonic
from typing import Any

import gevent
import gevent.event
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from app.storage.engine import Keys, StorageError, StorageUnavailable
from app.storage.kafka.clients import Clients, storage_error
from app.storage.kafka.threads import BlockingCalls, Outcome, unwrap

PRODUCE_SLICE = 1000
"""An append yields to the hub after producing this many events."""

POLL_INTERVAL_S = 0.1
"""How long the poll thread waits for delivery reports before looking whether to stop."""

QUEUE_FULL_BACKOFF_S = 0.005


class _Delivery:
    """The delivery reports of one partition's events in one append.

    ``report`` runs on the producer's poll thread; the last report wakes the
    waiting greenlet through its hub's thread-safe callback queue."""

    __slots__ = ("_loop", "_remaining", "done", "error", "offsets")

    def __init__(self, count: int, loop: Any) -> None:
        self._loop = loop
        self._remaining = count
        self.done = gevent.event.Event()
        self.error: KafkaError | None = None
        self.offsets: list[int] = []

    def report(self, error: KafkaError | None, message: Message) -> None:
        offset = message.offset() if error is None else None
        if offset is not None:
            self.offsets.append(offset)
        elif self.error is None:
            # A broker that takes an event for a duplicate acknowledges it without an
            # offset. A restarted Tansu does so when it gave a producer id it forgot to
            # another producer, and nothing is stored: it is no success.
            self.error = error or KafkaError(
                KafkaError._FAIL, "acknowledged without an offset (taken for a duplicate)")
        self._remaining -= 1
        if self._remaining == 0:
            self._loop.run_callback_threadsafe(self.done.set)


class _Running:
    """One producer and whether its poll thread should stop."""

    __slots__ = ("poller", "producer", "stopping")

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.stopping = False
        self.poller: gevent.event.AsyncResult[Outcome[None]] | None = None


def _raise_if_retired(running: _Running, topic: str, storage: str) -> None:
    """An append that yielded finds its producer retired meanwhile (by another append,
    or with the brokers): its poll thread closes it, and producing more would raise."""
    if running.stopping:
        raise StorageUnavailable(storage, f"{topic}: the producer was replaced during the "
                                          "append (the events produced may be stored all "
                                          "the same)")


class Appender:
    """Produces batches and waits for their acknowledgements. The producer and
    its poll thread start on the first append."""

    def __init__(self, clients: Clients, threads: BlockingCalls, timeout: float) -> None:
        self._clients = clients
        self._threads = threads
        self._timeout = timeout
        self._running: _Running | None = None
        self._retired: list[_Running] = []

    def append_many(
        self, topic: str, batches: Mapping[int, Sequence[bytes]], keys: Keys | None = None
    ) -> dict[int, list[int] | StorageError]:
        """Produce every partition's events (none empty; each with its key from ``keys``,
        if given), then wait once for all acknowledgements; each partition succeeds or
        fails on its own."""
        running = self._started_producer()
        producer = running.producer
        deadline = monotonic() + self._timeout
        loop = gevent.get_hub().loop
        deliveries = {p: _Delivery(len(payloads), loop) for p, payloads in batches.items()}
        produced = 0
        for partition, payloads in batches.items():
            report = deliveries[partition].report
            partition_keys = keys[partition] if keys is not None else repeat(None, len(payloads))
            for payload, key in zip(payloads, partition_keys, strict=True):
                produced += 1
                if produced % PRODUCE_SLICE == 0:
                    gevent.sleep(0)  # let other greenlets run during a very large batch
                    _raise_if_retired(running, topic, self._threads.storage)
                while True:
                    try:
                        producer.produce(topic, payload, key, partition=partition,
                                         on_delivery=report)
                        break
                    except BufferError:
                        # The local queue is full: wait for deliveries to make room.
                        if monotonic() >= deadline:
                            raise StorageError(
                                f"{topic}: the producer queue stayed full") from None
                        gevent.sleep(QUEUE_FULL_BACKOFF_S)
                        _raise_if_retired(running, topic, self._threads.storage)
                    except KafkaException as error:
                        raise storage_error(error, f"{topic}/{partition}",
                                            self._threads.storage) from error
        results: dict[int, list[int] | StorageError] = {}
        for partition, delivery in deliveries.items():
            if not delivery.done.wait(max(0.0, deadline - monotonic())):
                results[partition] = StorageUnavailable(
                    self._threads.storage, f"{topic}/{partition}: not acknowledged within "
                    f"{self._timeout:g} s (the events may be stored all the same)")
                self._retire(running)
            elif delivery.error is not None:
                results[partition] = storage_error(delivery.error, f"{topic}/{partition}",
                                                   self._threads.storage)
                if delivery.error.fatal():
                    self._retire(running)
            else:
                # Reports of one partition arrive in offset order, and payloads were
                # produced in order; sorting keeps that true even if reports were reordered.
                results[partition] = sorted(delivery.offsets)
        return results

    def close(self) -> None:
        """Stop the poll threads once they flushed what is still queued."""
        self.retire()
        for running in self._retired:
            if running.poller is not None:
                unwrap(running.poller.get())
        self._retired = []

    def retire(self) -> None:
        """Retire the current producer, if any: the brokers went away, and those that
        come back may not know its producer id. (Waiting for an append to go
        unacknowledged cost each worker's first publish after a Tansu restart the
        whole timeout, and a 503.)"""
        if self._running is not None:
            self._retire(self._running)

    def _retire(self, running: _Running) -> None:
        """Let the producer's thread flush and close it; appends start a new one."""
        running.stopping = True
        self._retired = [r for r in self._retired if r.poller is None or not r.poller.ready()]
        if self._running is running:
            self._running = None
            self._retired.append(running)

    def start(self) -> None:
        """Start the producer now: librdkafka connects and gets its producer id in the
        background, so the first append does not wait for that."""
        self._started_producer()

    def _started_producer(self) -> _Running:
        self._threads.ensure_running()
        if self._running is None:
            running = self._running = _Running(self._clients.producer(self._timeout))
            running.poller = self._threads.spawn(self._serve_deliveries, running)
        return self._running

    def _serve_deliveries(self, running: _Running) -> None:
        """The producer's poll thread: delivery reports run here until the engine
        closes or retires it; then the last ones are flushed and the producer is closed."""
        producer = running.producer
        while not running.stopping:
            producer.poll(POLL_INTERVAL_S)
        producer.flush(self._timeout)
        producer.purge()
        producer.close()
