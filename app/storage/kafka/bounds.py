"""The oldest and newest offset of each partition of a topic (blocking: pool threads only).

ListOffsets gives the oldest offsets and a first guess at the ends; the true
end of each partition is the high watermark of a fetch once the consumer caught
up with it (see ``clients``). The fetch starts just before the reported end:
where that report is right, it holds one record and the broker answers at once.
Brokers known to report the log end (``NAKADI_KAFKA_EXACT_LIST_OFFSETS``) are
asked ListOffsets alone (``listed_bounds``).
"""

from __future__ import annotations

from time import monotonic

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from app.storage.engine import PartitionBounds, StorageUnavailable
from app.storage.kafka.clients import (
    DRAIN_BATCH,
    SNAPSHOT_FETCH_WAIT_MS,
    Clients,
    caught_up,
    kafka_error,
    records,
    storage_error,
)
from app.storage.kafka.topics import Topics

END_CHECK_S = 0.05
"""How often a bounds call looks whether a fetch reported the end: some brokers
(Tansu) answer a fetch past the end with an empty response instead of an error."""


def partition_bounds(clients: Clients, topics: Topics, topic: str, partitions: range,
                     timeout: float) -> list[PartitionBounds]:
    """The bounds of every partition, within ``timeout`` seconds per broker call."""
    oldest, reported_end = listed_offsets(topics, topic, partitions)
    starts = {p: max(oldest[p], reported_end[p] - 1) for p in partitions}
    ends = _log_ends(clients, topic, starts, timeout, topics.storage)
    return [PartitionBounds(p, oldest[p], ends[p] - 1) for p in partitions]


def listed_bounds(topics: Topics, topic: str, partitions: range) -> list[PartitionBounds]:
    """The bounds of every partition from ListOffsets alone: right only where the
    reported end is the log end (Apache Kafka)."""
    oldest, end = listed_offsets(topics, topic, partitions)
    return [PartitionBounds(p, oldest[p], end[p] - 1) for p in partitions]


def listed_offsets(topics: Topics, topic: str, partitions: range
                   ) -> tuple[dict[int, int], dict[int, int]]:
    """ListOffsets' oldest offset and reported end of each partition. The reported end
    is the log end on Apache Kafka; on Tansu, the first offset of the newest record
    batch + 1: the offset before it always exists."""
    try:
        return topics.list_offsets(topic, partitions)
    except KafkaException as error:
        found = kafka_error(error)
        if found is None or found.code() != KafkaError._NOENT:
            raise storage_error(error, topic, topics.storage) from error
        # No leader found: librdkafka remembers a topic it once found missing
        # (deleted and created again) until its metadata is refreshed.
        topics.metadata_partition_count(topic)
        return topics.list_offsets(topic, partitions)


def _log_ends(clients: Clients, topic: str, starts: dict[int, int], timeout: float,
              storage: str) -> dict[int, int]:
    """The true log end of each partition: the high watermark reported by a
    fetch once the consumer caught up with it."""
    assignment = [TopicPartition(topic, p, offset) for p, offset in starts.items()]
    consumer = clients.consumer(assignment, SNAPSHOT_FETCH_WAIT_MS)
    positions = dict(starts)
    ends: dict[int, int] = {}
    deadline = monotonic() + timeout
    try:
        while True:
            for partition, position in positions.items():
                watermark = TopicPartition(topic, partition)
                if partition not in ends and caught_up(consumer, watermark, position):
                    ends[partition] = consumer.get_watermark_offsets(watermark, cached=True)[1]
            if len(ends) == len(starts):
                return ends
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise StorageUnavailable(storage, f"{topic}: no answer within {timeout:g} s")
            messages = consumer.consume(1, min(remaining, END_CHECK_S))
            if messages:
                messages += consumer.consume(DRAIN_BATCH, 0)
            for partition, offset, _ in records(messages, topic, storage):
                positions[partition] = offset + 1
    finally:
        consumer.close()
