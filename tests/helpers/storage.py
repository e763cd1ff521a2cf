"""What the broker stored, read and changed behind its back."""

from __future__ import annotations

import json
import time
import uuid

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource

from app.registry import operations
from app.repository.event_types import event_type_with_timelines
from app.repository.storages import get_storage
from app.services import Services
from app.storage.across_timelines import EngineFor
from app.storage.engine import BEFORE_FIRST, PartitionBounds, StorageEngine
from app.storage.engines import build_engine
from app.storage.offsets import encode_offset

BEFORE_FIRST_OFFSET = encode_offset(1, BEFORE_FIRST)


def create_event_type(services: Services, prefix: str) -> str:
    """A new event type of any JSON object (category undefined, 2 partitions) on the
    default storage, made in-process; its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    operations.create(services, {
        "name": name, "owning_application": "tests", "category": "undefined",
        "schema": {"type": "json_schema", "schema": json.dumps({"type": "object"})},
        "default_statistic": {"messages_per_minute": 1, "message_size": 1,
                              "read_parallelism": 2, "write_parallelism": 2}})
    return name


def topic_retention_ms(pool, storage_id: str, topic: str) -> int:
    """The retention the storage holds for the topic: PostgreSQL's row, Kafka's
    ``retention.ms``."""
    storage = get_storage(pool, storage_id)
    if storage.storage_type == "postgres":
        [(retention,)] = pool.fetch_all("SELECT retention_ms FROM log_topics WHERE name = %s",
                                        (topic,))
        return retention
    admin = AdminClient({"bootstrap.servers": storage.configuration["bootstrap_servers"]})
    resource = ConfigResource("topic", topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    return int(configs["retention.ms"].value)


def kafka_topic(pool, storage_id: str, topic: str, partitions: int
                ) -> tuple[dict[str, str], list[bytes | None]]:
    """A Kafka topic's configuration and the key of every record, partition by
    partition, in offset order."""
    servers = get_storage(pool, storage_id).configuration["bootstrap_servers"]
    resource = ConfigResource("topic", topic)
    admin = AdminClient({"bootstrap.servers": servers})  # kept until its answer came
    described = admin.describe_configs([resource])[resource].result(timeout=10)
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "tests",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    keys: dict[int, list[bytes | None]] = {p: [] for p in range(partitions)}
    ended: set[int] = set()
    deadline = time.monotonic() + 10
    try:
        while len(ended) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition())
            elif error is not None:
                raise KafkaException(error)
            else:
                keys[message.partition()].append(message.key())
    finally:
        consumer.close()
    assert len(ended) == partitions, "the topic's ends were not reached"
    return ({name: entry.value for name, entry in described.items()},
            [key for partition in range(partitions) for key in keys[partition]])


def engine_for(pool, storage_id: str) -> StorageEngine:
    return build_engine(get_storage(pool, storage_id), pool)


def compact_postgres_now(pool) -> None:
    """Compact every compacted topic of the ``postgres`` storage at once, as its
    background compaction does every ``NAKADI_COMPACTION_INTERVAL_S``."""
    engine = engine_for(pool, "postgres")
    try:
        engine.compact(0)
    finally:
        engine.close()


def counting_bounds(engine_for: EngineFor) -> tuple[EngineFor, list[str]]:
    """``engine_for`` whose engines note the topics their ``bounds`` is asked about,
    and that list (each answer costs the storage: on kafka a consumer and a fetch)."""
    asked: list[str] = []

    class Counting:
        def __init__(self, storage_id: str) -> None:
            self.engine = engine_for(storage_id)

        def bounds(self, topic: str) -> list[PartitionBounds]:
            asked.append(topic)
            return self.engine.bounds(topic)

    return Counting, asked  # type: ignore[return-value]


def off(engine_offset: int) -> str:
    """The client offset of an engine offset in an event type's first timeline."""
    return encode_offset(1, engine_offset)


def stored(pool, name: str) -> dict[int, list[dict]]:
    """Every stored event of the event type, by partition, in offset order."""
    timeline = event_type_with_timelines(pool, name)[1].active
    engine = engine_for(pool, timeline.storage_id)
    try:
        return {p.partition: [json.loads(e.payload) for e in
                              engine.read(timeline.topic, p.partition, BEFORE_FIRST, 10_000)]
                for p in engine.bounds(timeline.topic)}
    finally:
        engine.close()


def all_stored(pool, name: str) -> list[dict]:
    return [event for events in stored(pool, name).values() for event in events]


def expire(pool, name: str, partition: int, below: int) -> None:
    """Remove a partition's events before an engine offset, as retention does (postgres;
    retention removes whole chunks, this trims the one that straddles ``below``)."""
    topic = event_type_with_timelines(pool, name)[1].active.topic
    where = ("topic_id = (SELECT id FROM log_topics WHERE name = %(topic)s)"
             " AND partition = %(partition)s")
    values = {"topic": topic, "partition": partition, "below": below}
    pool.execute(f"DELETE FROM log_chunks WHERE {where} AND last_offset < %(below)s", values)
    pool.execute(
        "UPDATE log_chunks SET first_offset = %(below)s, payloads = array_to_string("
        "(string_to_array(payloads, E'\\n'))[%(below)s - first_offset + 1:], E'\\n')"
        f" WHERE {where} AND first_offset < %(below)s", values)
