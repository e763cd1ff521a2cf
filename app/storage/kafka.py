"""The ``kafka`` storage engine: topics in Apache Kafka (or a broker speaking its
protocol), through confluent-kafka.

gevent and librdkafka: every librdkafka call that can wait (``poll``, ``flush``,
``consume`` with a timeout, admin futures, metadata) blocks the whole gevent hub,
so it runs in this engine's own pool of native threads (``gevent.threadpool``),
never on the hub. The engine has its own pool rather than the hub's default one
because readers park a thread while they wait, and the hub's pool also resolves
DNS. Results cross back to greenlets through the pool's async watcher, or, for
delivery reports, through ``loop.run_callback_threadsafe``: gevent's events are
not safe to set from another thread.

Appends share one idempotent producer per engine (one engine per worker
process). An append produces its whole batch and then waits for all delivery
reports, which a dedicated poll thread serves.

Ends of partitions come from the high watermark of Fetch responses, never from
ListOffsets(latest) alone: Tansu answers that with the base offset of the newest
record batch + 1 instead of the log end, and answers a fetch past the end with
an empty response instead of an error. A read stops once the consumer caught up
with the watermark; bounds fetch from just before the reported end and take the
watermark of that fetch. Both are right on Apache Kafka as well.

A consumer asked for offsets that no longer exist restarts at the oldest one;
events at or before the asked position are filtered out.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from time import monotonic
from typing import Any, TypeVar

import gevent
import gevent.event
import gevent.monkey
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from gevent.threadpool import ThreadPool

from app.storage.engine import (
    PartitionBounds,
    StorageEngine,
    StorageError,
    StoredEvent,
    TopicNotFound,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
"""How long an append waits for its acknowledgements, and any other call for the broker."""

DEFAULT_MAX_THREADS = 256
"""Native threads of one engine: one per waiting reader, plus short-lived blocking calls."""

MAX_MESSAGE_BYTES = 2 * 1024 * 1024
"""Largest record the producer sends and a created topic accepts (events of 1 MB fit)."""

STREAM_FETCH_WAIT_MS = 20
"""How long the broker may hold a fetch that found nothing. Apache Kafka answers a held fetch
as soon as data arrives; Tansu does not always, so this bounds how late a waiting reader sees
new events there (100 ms gave a p99 of 74 ms publish-to-stream; 20 ms, 20 ms). The cost is
an idle reader asking about 50 times a second."""

SNAPSHOT_FETCH_WAIT_MS = 10
"""The same for reads that do not wait and for bounds: the broker answers an empty fetch fast."""

WAIT_SLICE_S = 0.5
"""The longest a reader waits in one pool thread, so that closing it never waits long."""

END_CHECK_S = 0.05
"""How often a read or bounds call looks whether a fetch reported the end: some brokers
(Tansu) answer a fetch past the end with an empty response instead of an error."""

CHECK_TIMEOUT_S = 3.0
DRAIN_BATCH = 1000
"""Most messages taken from a consumer in one call: building them holds the GIL."""

PRODUCE_SLICE = 1000
"""An append yields to the hub after producing this many events."""

POLL_INTERVAL_S = 0.1
QUEUE_FULL_BACKOFF_S = 0.005

_NOT_FOUND = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)

# A lock that works across native threads whether or not threading is monkey-patched.
_allocate_native_lock = gevent.monkey.get_original("_thread", "allocate_lock")


def _storage_error(error: KafkaError | KafkaException, what: str) -> StorageError:
    """A ``StorageError`` (``TopicNotFound`` where it says so) for a librdkafka error."""
    kafka_error = error.args[0] if isinstance(error, KafkaException) else error
    if isinstance(kafka_error, KafkaError) and kafka_error.code() in _NOT_FOUND:
        return TopicNotFound(f"{what}: the topic does not exist")
    return StorageError(f"{what}: {kafka_error}")


def _outcome(func: Callable[..., T], args: tuple, kwargs: dict) -> tuple[bool, T | Exception]:
    """Run ``func`` in a pool thread and return its result or exception, so that
    expected failures are re-raised in the greenlet instead of printed by the hub."""
    try:
        return True, func(*args, **kwargs)
    except Exception as error:
        return False, error


def _unwrap(outcome: tuple[bool, Any]) -> Any:
    succeeded, value = outcome
    if not succeeded:
        raise value
    return value


class _Delivery:
    """The delivery reports of one append.

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
            self.offsets.append(message.offset())
        elif self.error is None:
            self.error = error
        self._remaining -= 1
        if self._remaining == 0:
            self._loop.run_callback_threadsafe(self.done.set)


class KafkaStreamReader:
    """Reads several partitions of one topic through its own assigned consumer.

    Only one thing touches the consumer at a time: the hub drains what is
    already fetched (never waits) while no pool thread waits on it, and the
    pool threads that wait or close take ``_lock``."""

    def __init__(
        self, engine: KafkaEngine, consumer: Consumer, topic: str, positions: Mapping[int, int]
    ) -> None:
        self._engine = engine
        self._consumer = consumer
        self.topic = topic
        self._next = {partition: after + 1 for partition, after in positions.items()}
        self._lock = _allocate_native_lock()
        self._waiting: gevent.event.AsyncResult | None = None
        self._closed = False
        self._deleted = False

    def poll(self, max_events: int, timeout: float) -> list[StoredEvent]:
        if max_events <= 0:
            return []
        deadline = monotonic() + timeout
        while True:
            if self._closed:
                raise self._closed_error()
            if self._waiting is None:
                events = self._drain(max_events)
                remaining = deadline - monotonic()
                if events or remaining <= 0:
                    return events
                self._waiting = self._engine._spawn(
                    self._wait_for_one, min(remaining, WAIT_SLICE_S)
                )
            # An interrupted poll (timeout, kill) leaves the wait for the next call,
            # so a message it brings back is not lost.
            waiting = self._waiting
            outcome = waiting.get()
            self._waiting = None
            if self._closed:
                raise self._closed_error()
            try:
                events = self._take(_unwrap(outcome))
            except KafkaException as error:
                raise _storage_error(error, self.topic) from error
            if events:
                return events + self._drain(max_events - len(events))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._waiting = None
        self._engine._forget(self)
        _unwrap(self._engine._spawn(self._close_consumer).get())

    def _topic_deleted(self) -> None:
        self._deleted = True
        self.close()

    def _closed_error(self) -> StorageError:
        if self._deleted:
            return TopicNotFound(f"{self.topic}: the topic was deleted")
        return StorageError(f"{self.topic}: the reader is closed")

    def _drain(self, max_events: int) -> list[StoredEvent]:
        """What the consumer has already fetched, without waiting."""
        if max_events <= 0:
            return []
        try:
            return self._take(self._consumer.consume(min(max_events, DRAIN_BATCH), 0))
        except KafkaException as error:
            raise _storage_error(error, self.topic) from error

    def _wait_for_one(self, timeout: float) -> list[Message]:
        with self._lock:
            if self._closed:
                return []
            return self._consumer.consume(1, timeout)

    def _close_consumer(self) -> None:
        with self._lock:
            self._consumer.close()

    def _take(self, messages: Iterable[Message]) -> list[StoredEvent]:
        events = []
        for message in _records(messages, self.topic):
            partition, offset = message.partition(), message.offset()
            if offset < self._next[partition]:
                continue  # at or before the asked position: the consumer restarted earlier
            self._next[partition] = offset + 1
            events.append(StoredEvent(partition, offset, message.value() or b""))
        return events


class KafkaEngine(StorageEngine):
    """Event storage in Kafka topics; one instance per worker process.

    ``client_config`` holds extra librdkafka properties (security, tuning) for
    every client; they override the engine's defaults. ``timeout`` bounds how long
    an append waits for its acknowledgements and any call waits for the broker.
    ``create_topic`` of an existing topic raises ``StorageError``.

    Clients and threads start on first use, so an engine built before gunicorn
    forks is still safe to use in the workers."""

    storage_type = "kafka"

    def __init__(
        self,
        bootstrap_servers: str,
        client_config: Mapping[str, Any] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_threads: int = DEFAULT_MAX_THREADS,
    ) -> None:
        self._common = {
            "bootstrap.servers": bootstrap_servers,
            # Metadata requests must never create a topic on a broker that auto-creates.
            "allow.auto.create.topics": False,
            "error_cb": self._client_error,
        }
        self._overrides = dict(client_config or {})
        self._timeout = timeout
        self._max_threads = max_threads
        self._pool: ThreadPool | None = None
        self._loop: Any = None
        self._admin_client: AdminClient | None = None
        self._producer: Producer | None = None
        self._poller: gevent.event.AsyncResult | None = None
        self._stopping = False
        self._closed = False
        self._partitions: dict[str, int] = {}
        self._readers: set[KafkaStreamReader] = set()

    # -- topics ---------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int, retention_ms: int) -> None:
        config = {"retention.ms": str(retention_ms), "max.message.bytes": str(MAX_MESSAGE_BYTES)}
        futures = self._admin().create_topics(
            [NewTopic(topic, num_partitions=partitions, config=config)],
            operation_timeout=self._timeout,
            request_timeout=self._timeout,
        )
        error = self._run(topic, futures[topic].exception)
        if error is not None:
            if error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                raise StorageError(f"{topic}: the topic already exists") from error
            raise _storage_error(error, topic) from error
        # Known right away: metadata may lag behind the creation on a real cluster.
        self._partitions[topic] = partitions

    def delete_topic(self, topic: str) -> None:
        self._partitions.pop(topic, None)
        # librdkafka 2.16 crashed (SIGSEGV) when a consumer fetched from a topic that
        # Tansu had just deleted: stop this engine's readers of the topic first.
        for reader in [reader for reader in self._readers if reader.topic == topic]:
            reader._topic_deleted()
        futures = self._admin().delete_topics(
            [topic], operation_timeout=self._timeout, request_timeout=self._timeout
        )
        error = self._run(topic, futures[topic].exception)
        if error is not None and error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise _storage_error(error, topic) from error

    # -- writing --------------------------------------------------------------

    def append_many(
        self, topic: str, batches: Mapping[int, Sequence[bytes]]
    ) -> dict[int, list[int] | StorageError]:
        """Produce every partition's events, then wait once for all acknowledgements;
        each partition succeeds or fails on its own."""
        batches = {partition: payloads for partition, payloads in batches.items() if payloads}
        for partition in batches:
            self._check_partition(topic, partition)
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
                        raise _storage_error(error, f"{topic}/{partition}") from error
        results: dict[int, list[int] | StorageError] = {}
        for partition, delivery in deliveries.items():
            if not delivery.done.wait(max(0.0, deadline - monotonic())):
                results[partition] = StorageError(
                    f"{topic}/{partition}: not acknowledged within {self._timeout:g} s")
            elif delivery.error is not None:
                results[partition] = _storage_error(delivery.error, f"{topic}/{partition}")
            else:
                # Reports of one partition arrive in offset order, and payloads were
                # produced in order; sorting keeps that true even if reports were reordered.
                results[partition] = sorted(delivery.offsets)
        if any(isinstance(result, StorageError) for result in results.values()):
            self._raise_if_gone(topic)
        return results

    # -- reading --------------------------------------------------------------

    def read(
        self, topic: str, partition: int, after: int, limit: int, wait: float = 0.0
    ) -> list[StoredEvent]:
        self._check_partition(topic, partition)
        if limit <= 0:
            return []
        try:
            return self._run(topic, self._read_blocking, topic, partition, after, limit, wait)
        except StorageError:
            self._raise_if_gone(topic)
            raise

    def reader(self, topic: str, positions: Mapping[int, int]) -> KafkaStreamReader:
        for partition in positions:
            self._check_partition(topic, partition)
        assignment = [TopicPartition(topic, p, after + 1) for p, after in positions.items()]
        consumer = self._run(topic, self._assigned_consumer, assignment, STREAM_FETCH_WAIT_MS)
        reader = KafkaStreamReader(self, consumer, topic, positions)
        self._readers.add(reader)
        return reader

    def bounds(self, topic: str) -> list[PartitionBounds]:
        # Fresh metadata: a topic deleted by another process is noticed now, rather
        # than when the offset requests time out.
        self._raise_if_gone(topic)
        partitions = range(self._partition_count(topic))
        try:
            return self._run(topic, self._bounds_blocking, topic, partitions)
        except StorageError:
            self._raise_if_gone(topic)
            raise

    # -- health and lifecycle -------------------------------------------------

    def check(self) -> None:
        self._run("the kafka broker", self._admin().list_topics, timeout=CHECK_TIMEOUT_S)

    def close(self) -> None:
        if self._closed:
            return
        for reader in list(self._readers):
            reader.close()
        self._closed = True
        if self._poller is not None:
            self._stopping = True
            _unwrap(self._poller.get())
        if self._pool is not None:
            self._pool.join()
            self._pool.kill()
        self._admin_client = None

    # -- blocking work, run in pool threads -------------------------------------

    def _read_blocking(
        self, topic: str, partition: int, after: int, limit: int, wait: float
    ) -> list[StoredEvent]:
        fetch_wait = STREAM_FETCH_WAIT_MS if wait > 0 else SNAPSHOT_FETCH_WAIT_MS
        consumer = self._assigned_consumer(
            [TopicPartition(topic, partition, after + 1)], fetch_wait
        )
        watermark = TopicPartition(topic, partition)
        try:
            events: list[StoredEvent] = []
            next_offset = after + 1
            started = monotonic()
            wait_until, answer_by = started + wait, started + self._timeout
            while len(events) < limit:
                now = monotonic()
                if _caught_up(consumer, watermark, next_offset):
                    if events or now >= wait_until:
                        break
                    remaining = wait_until - now
                elif now >= answer_by:
                    if events:
                        break
                    raise StorageError(f"{topic}/{partition}: no answer within {self._timeout:g} s")
                else:
                    remaining = answer_by - now
                # Slices: a fetch can report the end without any event to wake us.
                messages = consumer.consume(1, min(remaining, END_CHECK_S))
                if not messages:
                    continue
                answer_by = monotonic() + self._timeout
                room = min(limit - len(events) - 1, DRAIN_BATCH)
                if room > 0:
                    messages += consumer.consume(room, 0)
                for message in _records(messages, topic):
                    if message.offset() >= next_offset:
                        events.append(
                            StoredEvent(partition, message.offset(), message.value() or b"")
                        )
                        next_offset = message.offset() + 1
            return events
        finally:
            consumer.close()

    def _bounds_blocking(self, topic: str, partitions: range) -> list[PartitionBounds]:
        try:
            oldest, reported_end = self._list_offsets(topic, partitions)
        except KafkaException as error:
            if error.args[0].code() != KafkaError._NOENT:
                raise _storage_error(error, topic) from error
            # No leader found: librdkafka remembers a topic it once found missing
            # (deleted and created again) until its metadata is refreshed.
            self._metadata_partition_count(topic)
            oldest, reported_end = self._list_offsets(topic, partitions)
        # Fetch from one before the reported end: where that report is right, the
        # fetch holds one record and the broker answers at once.
        starts = {p: max(oldest[p], reported_end[p] - 1) for p in partitions}
        ends = self._log_ends(topic, starts)
        return [PartitionBounds(p, oldest[p], ends[p] - 1) for p in partitions]

    def _list_offsets(self, topic: str, partitions: range) -> tuple[dict[int, int], dict[int, int]]:
        """The oldest offset and the end reported by ListOffsets of each partition."""
        asked = [TopicPartition(topic, p) for p in partitions]
        answers = [
            self._admin().list_offsets({tp: spec for tp in asked}, request_timeout=self._timeout)
            for spec in (OffsetSpec.earliest(), OffsetSpec.latest())
        ]
        oldest, end = (
            {tp.partition: future.result().offset for tp, future in futures.items()}
            for futures in answers
        )
        return oldest, end

    def _log_ends(self, topic: str, starts: dict[int, int]) -> dict[int, int]:
        """The true log end of each partition: the high watermark reported by a
        fetch once the consumer caught up with it."""
        assignment = [TopicPartition(topic, p, offset) for p, offset in starts.items()]
        consumer = self._assigned_consumer(assignment, SNAPSHOT_FETCH_WAIT_MS)
        positions = dict(starts)
        ends: dict[int, int] = {}
        deadline = monotonic() + self._timeout
        try:
            while True:
                for partition, position in positions.items():
                    watermark = TopicPartition(topic, partition)
                    if partition not in ends and _caught_up(consumer, watermark, position):
                        ends[partition] = consumer.get_watermark_offsets(watermark, cached=True)[1]
                if len(ends) == len(starts):
                    return ends
                remaining = deadline - monotonic()
                if remaining <= 0:
                    raise StorageError(f"{topic}: no answer within {self._timeout:g} s")
                messages = consumer.consume(1, min(remaining, END_CHECK_S))
                if messages:
                    messages += consumer.consume(DRAIN_BATCH, 0)
                for message in _records(messages, topic):
                    positions[message.partition()] = message.offset() + 1
        finally:
            consumer.close()

    def _assigned_consumer(self, assignment: list[TopicPartition], fetch_wait_ms: int) -> Consumer:
        """A consumer reading the given partitions from the given offsets; it never
        joins a group or commits, so the group id is a throwaway."""
        consumer = Consumer(
            {
                **self._common,
                "group.id": f"nakadi-storage-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": fetch_wait_ms,
                # Room for the largest record while bounding memory per reader.
                "fetch.max.bytes": 4 * MAX_MESSAGE_BYTES,
                "max.partition.fetch.bytes": MAX_MESSAGE_BYTES,
                "queued.max.messages.kbytes": 4 * MAX_MESSAGE_BYTES // 1024,
                # Fetch again soon after a full local queue drained (the default waits 1 s).
                "fetch.queue.backoff.ms": 10,
                **self._overrides,
            }
        )
        try:
            consumer.assign(assignment)
        except KafkaException:
            consumer.close()
            raise
        return consumer

    def _serve_deliveries(self, producer: Producer) -> None:
        """The producer's poll thread: delivery reports run here until the engine
        closes; then the last ones are flushed and the producer is closed."""
        while not self._stopping:
            producer.poll(POLL_INTERVAL_S)
        producer.flush(self._timeout)
        producer.purge()
        producer.close()

    # -- helpers --------------------------------------------------------------

    def _threads(self) -> ThreadPool:
        if self._closed:
            raise StorageError("the kafka engine is closed")
        if self._pool is None:
            self._pool = ThreadPool(self._max_threads, idle_task_timeout=60)
            self._loop = self._pool.hub.loop
        return self._pool

    def _spawn(
        self, func: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> gevent.event.AsyncResult:
        """Start ``func`` in a pool thread; the result holds an ``_outcome`` pair."""
        return self._threads().spawn(_outcome, func, args, kwargs)

    def _run(self, what: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking call in a pool thread while this greenlet waits cooperatively;
        a librdkafka error becomes a ``StorageError`` about ``what``."""
        try:
            return _unwrap(self._spawn(func, *args, **kwargs).get())
        except KafkaException as error:
            raise _storage_error(error, what) from error

    def _admin(self) -> AdminClient:
        self._threads()
        if self._admin_client is None:
            self._admin_client = AdminClient({**self._common, **self._overrides})
        return self._admin_client

    def _started_producer(self) -> Producer:
        self._threads()
        if self._producer is None:
            self._producer = Producer(
                {
                    **self._common,
                    "acks": "all",
                    "enable.idempotence": True,
                    # An append hands over its whole batch at once: lingering only adds latency.
                    "linger.ms": 0,
                    "message.max.bytes": MAX_MESSAGE_BYTES,
                    "message.timeout.ms": int(self._timeout * 1000),
                    **self._overrides,
                }
            )
            self._poller = self._spawn(self._serve_deliveries, self._producer)
        return self._producer

    def _partition_count(self, topic: str) -> int:
        """The topic's partition count, from metadata asked once per topic."""
        count = self._partitions.get(topic)
        if count is None:
            count = self._run(topic, self._metadata_partition_count, topic)
        return count

    def _metadata_partition_count(self, topic: str) -> int:
        """Ask the broker for the topic's metadata (blocking) and remember its partition count.

        Asks for all topics: a metadata request naming a topic lets a broker that
        auto-creates topics create it again right after it was deleted (Tansu does)."""
        found = self._admin().list_topics(timeout=self._timeout).topics.get(topic)
        if found is None:
            raise TopicNotFound(f"{topic}: the topic does not exist")
        if found.error is not None:
            raise _storage_error(found.error, topic)
        count = self._partitions[topic] = len(found.partitions)
        return count

    def _check_partition(self, topic: str, partition: int) -> None:
        if not 0 <= partition < self._partition_count(topic):
            raise StorageError(f"{topic}: there is no partition {partition}")

    def _raise_if_gone(self, topic: str) -> None:
        """Raise ``TopicNotFound`` if the topic is gone (another process may have
        deleted it), asking the broker instead of the cache."""
        self._partitions.pop(topic, None)
        self._partition_count(topic)

    def _forget(self, reader: KafkaStreamReader) -> None:
        self._readers.discard(reader)

    def _client_error(self, error: KafkaError) -> None:
        """librdkafka's error callback. It runs on whichever thread serves the
        client, so the logging happens on the hub."""
        if self._loop is not None:
            self._loop.run_callback_threadsafe(log.warning, "kafka client error: %s", error)


def _records(messages: Iterable[Message], topic: str) -> Iterable[Message]:
    """The records among consumed messages; end-of-partition events only wake the
    consumer (the high watermark they carry is cached), other errors raise."""
    for message in messages:
        error = message.error()
        if error is None:
            yield message
        elif error.code() != KafkaError._PARTITION_EOF:
            raise _storage_error(error, topic)


def _caught_up(consumer: Consumer, partition: TopicPartition, next_offset: int) -> bool:
    """Whether the latest fetch of ``consumer`` reported nothing at or after ``next_offset``."""
    _, high = consumer.get_watermark_offsets(partition, cached=True)
    return high >= 0 and next_offset >= high
