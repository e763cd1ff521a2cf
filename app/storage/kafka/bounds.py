"""The oldest and newest offset of each partition of a topic (blocking: pool threads only).

ListOffsets gives the oldest offsets and a first guess at the ends; the true
end of each partition is the high watermark of a fetch once the consumer caught
up with it (see ``clients``). The fetch starts just before the reported end:
where that report is right, it holds one record and the broker answers at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from time import monotonic

import gevent.monkey
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from app.storage.engine import PartitionBounds, StorageUnavailable
from app.storage.kafka.clients import (
    DRAIN_BATCH,
    KAFKA,
    SNAPSHOT_FETCH_WAIT_MS,
    Clients,
    caught_up,
    kafka_error,
    raise_unless_end,
    storage_error,
)
from app.storage.kafka.topics import Topics

END_CHECK_S = 0.05
"""How often a bounds call looks whether a fetch reported the end: some brokers
(Tansu) answer a fetch past the end with an empty response instead of an error."""

KEEP_IDLE = 4
"""Idle snapshot consumers an engine keeps: as many bounds calls as usually run at once."""

# A lock that works across native threads whether or not threading is monkey-patched.
_allocate_native_lock = gevent.monkey.get_original("_thread", "allocate_lock")


class SnapshotConsumers:
    """Consumers kept between bounds calls, each lent to one call at a time.

    A consumer made for each call connected, fetched and closed: a call cost 2.8 ms
    of CPU and took 4.3 ms (8 partitions, in-process); lent, 1.1 ms and 2.5 ms. A
    lent consumer is assigned the call's partitions and unassigned afterwards, so an
    idle one fetches nothing. It still remembers the watermarks of earlier calls, so
    a call trusts a partition's only once a record or the end of that partition at or
    after the call's start came back (``_log_ends``). A consumer whose call failed is
    closed, not kept."""

    def __init__(self, clients: Clients, keep: int = KEEP_IDLE) -> None:
        self._clients = clients
        self._keep = keep
        self._idle: list[Consumer] = []
        self._lock = _allocate_native_lock()

    @contextmanager
    def lend(self, assignment: list[TopicPartition]) -> Iterator[Consumer]:
        with self._lock:
            consumer = self._idle.pop() if self._idle else None
        if consumer is None:
            consumer = self._clients.consumer(assignment, SNAPSHOT_FETCH_WAIT_MS)
        else:
            try:
                consumer.assign(assignment)
            except KafkaException:
                consumer.close()
                raise
        try:
            yield consumer
            consumer.unassign()
        except BaseException:
            consumer.close()
            raise
        with self._lock:
            kept = len(self._idle) < self._keep
            if kept:
                self._idle.append(consumer)
        if not kept:
            consumer.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for consumer in idle:
            consumer.close()


def partition_bounds(consumers: SnapshotConsumers, topics: Topics, topic: str,
                     partitions: range, timeout: float) -> list[PartitionBounds]:
    """The bounds of every partition, within ``timeout`` seconds per broker call."""
    try:
        oldest, reported_end = topics.list_offsets(topic, partitions)
    except KafkaException as error:
        found = kafka_error(error)
        if found is None or found.code() != KafkaError._NOENT:
            raise storage_error(error, topic) from error
        # No leader found: librdkafka remembers a topic it once found missing
        # (deleted and created again) until its metadata is refreshed.
        topics.metadata_partition_count(topic)
        oldest, reported_end = topics.list_offsets(topic, partitions)
    starts = {p: max(oldest[p], reported_end[p] - 1) for p in partitions}
    ends = _log_ends(consumers, topic, starts, timeout)
    return [PartitionBounds(p, oldest[p], ends[p] - 1) for p in partitions]


def _log_ends(consumers: SnapshotConsumers, topic: str, starts: dict[int, int], timeout: float
              ) -> dict[int, int]:
    """The true log end of each partition: the high watermark reported by a
    fetch once the consumer caught up with it. A partition's cached watermark
    counts only once this call received a record or the partition's end at or
    after its start: a lent consumer may still hold one from an earlier call."""
    assignment = [TopicPartition(topic, p, offset) for p, offset in starts.items()]
    positions = dict(starts)
    answered: set[int] = set()
    ends: dict[int, int] = {}
    deadline = monotonic() + timeout
    with consumers.lend(assignment) as consumer:
        while True:
            for fetched in answered.difference(ends):
                watermark = TopicPartition(topic, fetched)
                if caught_up(consumer, watermark, positions[fetched]):
                    ends[fetched] = consumer.get_watermark_offsets(watermark, cached=True)[1]
            if len(ends) == len(starts):
                return ends
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise StorageUnavailable(KAFKA, f"{topic}: no answer within {timeout:g} s")
            messages = consumer.consume(1, min(remaining, END_CHECK_S))
            if messages:
                messages += consumer.consume(DRAIN_BATCH, 0)
            for message in messages:
                error = message.error()
                if error is not None:
                    raise_unless_end(error, topic)
                partition, offset = message.partition(), message.offset()
                if partition is None or offset is None or offset < starts[partition]:
                    continue
                answered.add(partition)
                if error is None:
                    positions[partition] = offset + 1
