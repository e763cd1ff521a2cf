"""librdkafka clients as the engine configures them, and what their answers mean.

Ends of partitions come from the high watermark of Fetch responses, not from
ListOffsets(latest) alone (unless the engine is told its brokers answer that with
the log end, as Apache Kafka does): Tansu answers it with the base offset of the
newest record batch + 1 instead of the log end, and answers a fetch past the end with
an empty response instead of an error. So consumers report partition EOF, and
``caught_up`` compares a position with the watermark of the latest fetch. Both
are right on Apache Kafka as well.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from app.storage.engine import (
    StorageError,
    StorageUnavailable,
    TopicNotFound,
)

MAX_MESSAGE_BYTES = 2 * 1024 * 1024
"""Largest record the producer sends and a created topic accepts (events of 1 MB fit)."""

STREAM_FETCH_WAIT_MS = 20
"""How long the broker may hold a stream reader's fetch that found nothing, unless
``NAKADI_KAFKA_STREAM_FETCH_WAIT_MS`` says otherwise. Apache Kafka answers a held fetch as
soon as data arrives; Tansu does not always, so this bounds how late a waiting reader sees
new events there (100 ms gave a p99 of 74 ms publish-to-stream; 20 ms, 20 ms). The cost is
an idle reader asking about 50 times a second."""

SNAPSHOT_FETCH_WAIT_MS = 10
"""The same for bounds, which never wait for new events: the broker answers an empty fetch fast."""

DRAIN_BATCH = 1000
"""Most messages taken from a consumer in one call: building them holds the GIL."""

_NOT_FOUND = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)

_UNANSWERED = frozenset({
    KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN, KafkaError.REQUEST_TIMED_OUT, KafkaError.NETWORK_EXCEPTION,
})
"""Errors that say the broker did not answer, rather than what it answered."""

DEFAULT_STORAGE_ID = "kafka"


def outage_name(storage_id: str) -> str:
    """How an outage of the storage names it (``StorageUnavailable``)."""
    return f"Kafka (the {storage_id} storage)"


def kafka_error(error: BaseException | KafkaError) -> KafkaError | None:
    """The librdkafka error that ``error`` is or carries, if any."""
    if isinstance(error, KafkaError):
        return error
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return error.args[0]
    return None


def storage_error(error: BaseException | KafkaError, what: str, storage: str) -> StorageError:
    """A ``StorageError`` for a librdkafka error: ``TopicNotFound`` where it says so,
    ``StorageUnavailable`` (a 503 naming ``storage``, an ``outage_name``) where the
    broker did not answer.
    librdkafka reports "all brokers down" only after its own reconnection attempts,
    and under load later than a call's timeout: the timeout itself means an outage."""
    found = kafka_error(error)
    if found is not None and found.code() in _NOT_FOUND:
        return TopicNotFound(f"{what}: the topic does not exist")
    if found is not None and found.code() in _UNANSWERED:
        return StorageUnavailable(storage, f"{what}: {found}")
    return StorageError(f"{what}: {found if found is not None else error}")


def raise_unless_end(error: KafkaError, topic: str, storage: str) -> None:
    """Raises the error a consumed message carries unless it only reports the end of a
    partition: those only wake the consumer (the high watermark they carry is cached)."""
    if error.code() != KafkaError._PARTITION_EOF:
        raise storage_error(error, topic, storage)


def records(messages: Iterable[Message], topic: str, storage: str
            ) -> Iterator[tuple[int, int, bytes]]:
    """The (partition, offset, payload) of the records among consumed messages;
    errors other than the end of a partition raise."""
    for message in messages:
        error = message.error()
        if error is None:  # a record: its partition and offset are never None
            yield message.partition(), message.offset(), message.value() or b""  # type: ignore[misc]
        else:
            raise_unless_end(error, topic, storage)


def caught_up(consumer: Consumer, partition: TopicPartition, next_offset: int) -> bool:
    """Whether the latest fetch of ``consumer`` reported nothing at or after ``next_offset``."""
    _, high = consumer.get_watermark_offsets(partition, cached=True)
    return high >= 0 and next_offset >= high


class Clients:
    """Builds the engine's librdkafka clients. ``overrides`` (security, tuning)
    win over the engine's settings; ``on_error`` is librdkafka's error callback,
    which runs on whichever thread serves the client."""

    def __init__(
        self,
        bootstrap_servers: str,
        overrides: Mapping[str, Any],
        on_error: Callable[[KafkaError], None],
    ) -> None:
        self._common: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            # Metadata requests must never create a topic on a broker that auto-creates.
            "allow.auto.create.topics": False,
            "error_cb": on_error,
            # librdkafka writes its log to stderr in a format of its own, between the
            # JSON lines; its errors (a broker out of reach...) also reach error_cb,
            # which logs them as JSON. Only its critical lines stay.
            "log_level": 2,
        }
        self._overrides = dict(overrides)

    def admin(self) -> AdminClient:
        return AdminClient({**self._common, **self._overrides})

    def producer(self, timeout: float) -> Producer:
        """An idempotent producer that counts an event stored once all in-sync
        replicas have it, giving up after ``timeout`` seconds."""
        return Producer(
            {
                **self._common,
                "acks": "all",
                "enable.idempotence": True,
                # Appends from many requests at once share produce requests when the
                # producer lingers a little: at 1 ms (against 0) bench_publish gave 40% more
                # single-event requests a second and 25-80% more events at batch 10-1000,
                # for the worker's CPU per request down by a sixth; at 2 and 5 ms requests
                # wait out the linger instead.
                "linger.ms": 1,
                "message.max.bytes": MAX_MESSAGE_BYTES,
                "message.timeout.ms": int(timeout * 1000),
                **self._overrides,
            }
        )

    def consumer(self, assignment: list[TopicPartition], fetch_wait_ms: int) -> Consumer:
        """A consumer reading the given partitions from the given offsets (blocking);
        it never joins a group or commits, so the group id is a throwaway."""
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
