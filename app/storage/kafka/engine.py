"""``KafkaEngine``: the ``StorageEngine`` over Kafka topics, one per worker process."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import gevent
from confluent_kafka import Consumer, KafkaError, TopicPartition

from app.shared_calls import SharedCalls
from app.storage.engine import (
    Keys,
    PartitionBounds,
    StorageEngine,
    StorageError,
    StorageUnavailable,
)
from app.storage.kafka.availability import BrokerAvailability
from app.storage.kafka.bounds import listed_bounds, listed_offsets, partition_bounds
from app.storage.kafka.clients import (
    DEFAULT_STORAGE_ID,
    STREAM_FETCH_WAIT_MS,
    Clients,
    outage_name,
)
from app.storage.kafka.idle import CHECK_INTERVAL_S, IdleReaders
from app.storage.kafka.producer import Appender
from app.storage.kafka.reader import IDLE_AFTER_S, KafkaStreamReader
from app.storage.kafka.threads import BlockingCalls
from app.storage.kafka.topics import Topics

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
"""How long an append waits for its acknowledgements, and any other call for the broker."""

DEFAULT_MAX_THREADS = 256
"""Native threads of one engine: one per waiting reader, plus short-lived blocking calls."""


class KafkaEngine(StorageEngine):
    """Event storage in Kafka topics; one instance per worker process.

    ``client_config`` holds extra librdkafka properties (security, tuning) for
    every client; they override the engine's defaults. ``timeout`` bounds how long
    an append waits for its acknowledgements and any call waits for the broker;
    ``stream_fetch_wait_ms`` how long a stream reader's fetch that found nothing may be
    held (``STREAM_FETCH_WAIT_MS`` suits Tansu; Apache Kafka answers a held fetch when
    events arrive, so a longer wait costs no latency there and idle readers less).
    ``exact_list_offsets``: the brokers answer ListOffsets(latest) with the log end
    (Apache Kafka does), so ``bounds`` asks ListOffsets alone; otherwise each call
    also makes a consumer and fetches every partition's newest records, whose high
    watermark is the end (see ``bounds``). ``create_topic`` of an existing topic
    raises ``StorageError``. A stream reader that found nothing for ``idle_reader_s``
    gives its consumer up until ListOffsets, asked every ``idle_check_s``, shows
    events past its position; one that starts at the ends ``bounds`` last found
    starts that way. Outages name the storage by ``storage_id``.

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
        stream_fetch_wait_ms: int = STREAM_FETCH_WAIT_MS,
        exact_list_offsets: bool = False,
        idle_reader_s: float = IDLE_AFTER_S,
        idle_check_s: float = CHECK_INTERVAL_S,
        storage_id: str = DEFAULT_STORAGE_ID,
    ) -> None:
        self._timeout = timeout
        self._exact_list_offsets = exact_list_offsets
        self._stream_fetch_wait_ms = stream_fetch_wait_ms
        storage = outage_name(storage_id)
        self._threads = BlockingCalls(max_threads, storage)
        self._clients = Clients(bootstrap_servers, client_config or {}, self._client_error)
        self._topics = Topics(self._clients, self._threads, timeout)
        self._appender = Appender(self._clients, self._threads, timeout)
        self._idle = IdleReaders(self._topics, self._threads, idle_check_s)
        self._availability = BrokerAvailability(self._topics, self._threads,
                                                self._brokers_down, self._brokers_up)
        self._readers: set[KafkaStreamReader] = set()
        self._idle_reader_s = idle_reader_s
        self._ends: dict[str, dict[int, int]] = {}  # per topic, the ends bounds last found
        self._bounds_calls: SharedCalls[str, list[PartitionBounds]] = SharedCalls()

    # -- topics ---------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int, retention_ms: int,
                     compacted: bool = False) -> None:
        """While the brokers are known down, refused at once (it waited the timeout
        out each time); a creation that goes unanswered may still happen later."""
        with self._asking_brokers():
            self._topics.create(topic, partitions, retention_ms, compacted)

    def set_retention(self, topic: str, retention_ms: int) -> None:
        with self._asking_brokers():
            self._topics.set_retention(topic, retention_ms)

    def delete_topic(self, topic: str) -> None:
        with self._asking_brokers():
            # librdkafka 2.16 crashed (SIGSEGV) when a consumer fetched from a topic that
            # Tansu had just deleted: stop this engine's readers of the topic first.
            for reader in [reader for reader in self._readers if reader.topic == topic]:
                reader.topic_deleted()
            self._ends.pop(topic, None)
            self._topics.delete(topic)

    @contextmanager
    def _asking_brokers(self) -> Iterator[None]:
        """Refused at once while the brokers are known down; else ``_noting_unanswered``."""
        self._availability.raise_if_down()
        with self._noting_unanswered():
            yield

    @contextmanager
    def _noting_unanswered(self) -> Iterator[None]:
        """A call that waits its timeout out marks the brokers down from then on."""
        try:
            yield
        except StorageUnavailable as error:
            self._availability.unanswered(error)
            raise

    # -- writing --------------------------------------------------------------

    def append_many(
        self, topic: str, batches: Mapping[int, Sequence[bytes]], keys: Keys | None = None
    ) -> dict[int, list[int] | StorageError]:
        """Produce every partition's events (keyed, when ``keys`` are given), then wait
        once for all acknowledgements; each partition succeeds or fails on its own."""
        batches = {partition: payloads for partition, payloads in batches.items() if payloads}
        self._availability.raise_if_down()
        self._check_partitions(topic, batches)
        results = self._appender.append_many(topic, batches, keys)
        if any(isinstance(result, StorageError) for result in results.values()):
            for result in results.values():
                if isinstance(result, StorageUnavailable):  # not acknowledged in time
                    self._availability.unanswered(result)
            if self._availability.down:  # not acknowledged because the brokers went away
                return {partition: StorageUnavailable(self._threads.storage, str(result))
                        if isinstance(result, StorageError)
                        and not isinstance(result, StorageUnavailable) else result
                        for partition, result in results.items()}
            if not all(isinstance(result, StorageUnavailable) for result in results.values()
                       if isinstance(result, StorageError)):
                # Refused, not unanswered: maybe the topic is gone. (Asking an unanswering
                # broker again would only double the time to the 503.)
                self._topics.raise_if_gone(topic)
        return results

    def _check_partitions(self, topic: str, partitions: Iterable[int]) -> None:
        """``StorageError`` unless the topic has the partitions (its metadata may be asked
        for); a broker that does not answer is down from then on."""
        with self._noting_unanswered():
            for partition in partitions:
                self._topics.check_partition(topic, partition)

    # -- reading --------------------------------------------------------------

    def reader(self, topic: str, positions: Mapping[int, int]) -> KafkaStreamReader:
        self._availability.raise_if_down()
        self._check_partitions(topic, positions)
        following = {partition: after + 1 for partition, after in positions.items()}
        ends = self._ends.get(topic, {})
        consumer = None
        if any(ends.get(partition) != at for partition, at in following.items()):
            consumer = self._threads.run(topic, self._open_consumer, topic, following)
        reader = KafkaStreamReader(
            self._threads, lambda at: self._open_consumer(topic, at), consumer, topic,
            positions, self._idle, self._readers.discard, self._availability.raise_if_down,
            self._idle_reader_s)
        self._readers.add(reader)
        return reader

    def _open_consumer(self, topic: str, following: Mapping[int, int]) -> Consumer:
        """A stream consumer of the partitions from the given offsets (blocking)."""
        assignment = [TopicPartition(topic, p, at) for p, at in following.items()]
        return self._clients.consumer(assignment, self._stream_fetch_wait_ms)

    def bounds(self, topic: str) -> list[PartitionBounds]:
        """Callers for one topic at once share a call (see ``SharedCalls``)."""
        return self._bounds_calls.call(topic, lambda: self._bounds(topic))

    def _bounds(self, topic: str) -> list[PartitionBounds]:
        if self._exact_list_offsets:
            found = self._offsets_call(
                topic, lambda partitions: listed_bounds(self._topics, topic, partitions))
        else:
            found = self._offsets_call(topic, lambda partitions: partition_bounds(
                self._clients, self._topics, topic, partitions, self._timeout))
        self._ends[topic] = {available.partition: available.newest + 1 for available in found}
        return found

    def newest_at_least(self, topic: str) -> dict[int, int]:
        """From ListOffsets alone, on the engine's admin client: ~0.5 ms, where
        ``bounds`` makes a consumer and fetches (~5 ms of this process's CPU and as
        much of the broker's). Exact on Apache Kafka; on Tansu the first offset of the
        newest record batch."""
        _, ends = self._offsets_call(
            topic, lambda partitions: listed_offsets(self._topics, topic, partitions))
        return {partition: end - 1 for partition, end in ends.items()}

    def _offsets_call(self, topic: str, call: Callable[[range], T]) -> T:
        """``call`` with the topic's partitions, on a pool thread (it blocks)."""
        with self._asking_brokers():  # the metadata requests too
            # Fresh metadata: a topic deleted by another process is noticed now, rather
            # than when the offset requests time out.
            self._topics.raise_if_gone(topic)
            partitions = range(self._topics.partition_count(topic))
            try:
                return self._threads.run(topic, call, partitions)
            except StorageUnavailable:
                raise
            except StorageError:  # refused, not unanswered: maybe the topic is gone
                self._topics.raise_if_gone(topic)
                raise

    # -- health and lifecycle -------------------------------------------------

    def warm_up(self) -> None:
        self._appender.start()

    def raise_if_known_down(self) -> None:
        self._availability.raise_if_down()

    def check(self) -> None:
        self._availability.raise_if_down()
        self._topics.check()

    def close(self) -> None:
        if self._threads.shut_down:
            return
        self._availability.close()
        for reader in list(self._readers):
            reader.close()
        self._idle.close()
        self._threads.shut()
        self._appender.close()
        self._threads.join()
        self._topics.close()

    def _brokers_down(self) -> None:
        """librdkafka reported every broker down (on the hub)."""
        # Idle readers wait without a timer of their own (2,000 idle streams woke 4,000
        # times a second to look): an outage wakes them, and their polls end.
        self._idle.wake_all()
        self._appender.retire()

    def _brokers_up(self) -> None:
        """The brokers answer again: a producer retired during the outage is replaced
        now, as ``warm_up`` does at start, so the next append does not wait for its
        producer id (~0.5 s); the topics they lost are forgotten in a greenlet of their
        own (the prober must be done, to start again at once if the brokers go away)."""
        if not self._threads.shut_down:
            self._appender.start()
            gevent.spawn(self._topics.forget_lost)

    def _client_error(self, error: KafkaError) -> None:
        """librdkafka's error callback. It runs on whichever thread serves the
        client, so the logging happens on the hub."""
        self._availability.client_error(error)
        self._threads.call_on_hub(log.warning, "kafka client error: %s", error)
