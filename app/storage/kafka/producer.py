"""Appends: one idempotent producer per engine, and the thread serving its delivery reports.

An append produces its whole batch and then waits for all delivery reports
(producing one event at a time and waiting for each is many times slower).
The reports run on a dedicated poll thread; the last report of an append wakes
its greenlet through the hub's thread-safe callback queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from time import monotonic
from typing import Any

import gevent
import gevent.event
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from app.storage.engine import StorageError
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
        if error is None:
            offset = message.offset()
            assert offset is not None, "a delivered event has an offset"
            self.offsets.append(offset)
        elif self.error is None:
            self.error = error
        self._remaining -= 1
        if self._remaining == 0:
            self._loop.run_callback_threadsafe(self.done.set)


class Appender:
    """Produces batches and waits for their acknowledgements. The producer and
    its poll thread start on the first append."""

    def __init__(self, clients: Clients, threads: BlockingCalls, timeout: float) -> None:
        self._clients = clients
        self._threads = threads
        self._timeout = timeout
        self._producer: Producer | None = None
        self._poller: gevent.event.AsyncResult[Outcome[None]] | None = None
        self._stopping = False

    def append_many(
        self, topic: str, batches: Mapping[int, Sequence[bytes]]
    ) -> dict[int, list[int] | StorageError]:
        """Produce every partition's events (none empty), then wait once for all
        acknowledgements; each partition succeeds or fails on its own."""
        producer = self._started_producer()
        deadline = monotonic() + self._timeout
        loop = gevent.get_hub().loop
        deliveries = {p: _Delivery(len(payloads), loop) for p, payloads in batches.items()}
        produced = 0
        for partition, payloads in batches.items():
            report = deliveries[partition].report
            for payload in payloads:
                produced += 1
                if produced % PRODUCE_SLICE == 0:
                    gevent.sleep(0)  # let other greenlets run during a very large batch
                while True:
                    try:
                        producer.produce(topic, payload, partition=partition,
                                         on_delivery=report)
                        break
                    except BufferError:
                        # The local queue is full: wait for deliveries to make room.
                        if monotonic() >= deadline:
                            raise StorageError(
                                f"{topic}: the producer queue stayed full") from None
                        gevent.sleep(QUEUE_FULL_BACKOFF_S)
                    except KafkaException as error:
                        raise storage_error(error, f"{topic}/{partition}") from error
        results: dict[int, list[int] | StorageError] = {}
        for partition, delivery in deliveries.items():
            if not delivery.done.wait(max(0.0, deadline - monotonic())):
                results[partition] = StorageError(
                    f"{topic}/{partition}: not acknowledged within {self._timeout:g} s")
            elif delivery.error is not None:
                results[partition] = storage_error(delivery.error, f"{topic}/{partition}")
            else:
                # Reports of one partition arrive in offset order, and payloads were
                # produced in order; sorting keeps that true even if reports were reordered.
                results[partition] = sorted(delivery.offsets)
        return results

    def close(self) -> None:
        """Stop the poll thread once it flushed what is still queued."""
        if self._poller is not None:
            self._stopping = True
            unwrap(self._poller.get())

    def _started_producer(self) -> Producer:
        self._threads.ensure_running()
        if self._producer is None:
            self._producer = self._clients.producer(self._timeout)
            self._poller = self._threads.spawn(self._serve_deliveries, self._producer)
        return self._producer

    def _serve_deliveries(self, producer: Producer) -> None:
        """The producer's poll thread: delivery reports run here until the engine
        closes; then the last ones are flushed and the producer is closed."""
        while not self._stopping:
            producer.poll(POLL_INTERVAL_S)
        producer.flush(self._timeout)
        producer.purge()
        producer.close()
