"""Topic administration: creating and deleting topics, and each topic's partition
count, asked from metadata once and remembered."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    TopicMetadata,
)

from app.shared_calls import SharedCalls
from app.storage.engine import StorageError, TopicNotFound
from app.storage.kafka.clients import MAX_MESSAGE_BYTES, Clients, kafka_error, storage_error
from app.storage.kafka.threads import BlockingCalls

CHECK_TIMEOUT_S = 3.0
"""How long a health check waits for the broker."""


class Topics:
    """The topics of one broker, through one admin client started on first use."""

    def __init__(self, clients: Clients, threads: BlockingCalls, timeout: float) -> None:
        self._clients = clients
        self._threads = threads
        self._timeout = timeout
        self._admin_client: AdminClient | None = None
        self._partitions: dict[str, int] = {}
        self._fresh: SharedCalls[None, dict[str, TopicMetadata]] = SharedCalls()

    @property
    def storage(self) -> str:
        """How outages of the storage name it."""
        return self._threads.storage

    def create(self, topic: str, partitions: int, retention_ms: int,
               compacted: bool = False) -> None:
        """Create the topic; ``StorageError`` if it exists already. A ``compacted`` one
        has Kafka keep the newest record of each key (records must carry keys)."""
        config = {"retention.ms": str(retention_ms), "max.message.bytes": str(MAX_MESSAGE_BYTES),
                  "cleanup.policy": "compact" if compacted else "delete"}
        futures = self._admin().create_topics(
            [NewTopic(topic, num_partitions=partitions, config=config)],
            operation_timeout=self._timeout,
            request_timeout=self._timeout,
        )
        error = self._threads.run(topic, futures[topic].exception)
        if error is not None:
            found = kafka_error(error)
            if found is not None and found.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                raise StorageError(f"{topic}: the topic already exists") from error
            raise storage_error(error, topic, self.storage) from error
        # Known right away: metadata may lag behind the creation on a real cluster.
        self._partitions[topic] = partitions

    def set_retention(self, topic: str, retention_ms: int) -> None:
        """Set the topic's ``retention.ms``, its other settings kept; a missing topic is
        not an error."""
        setting = ConfigEntry("retention.ms", str(retention_ms),
                              incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource("topic", topic, incremental_configs=[setting])
        futures = self._admin().incremental_alter_configs(
            [resource], request_timeout=self._timeout)
        error = self._threads.run(topic, futures[resource].exception)
        if error is not None:
            found = kafka_error(error)
            if found is None or found.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise storage_error(error, topic, self.storage) from error

    def delete(self, topic: str) -> None:
        """Delete the topic; a missing one is not an error."""
        self._partitions.pop(topic, None)
        futures = self._admin().delete_topics(
            [topic], operation_timeout=self._timeout, request_timeout=self._timeout
        )
        error = self._threads.run(topic, futures[topic].exception)
        if error is not None:
            found = kafka_error(error)
            if found is None or found.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise storage_error(error, topic, self.storage) from error

    def partition_count(self, topic: str) -> int:
        """The topic's partition count, from metadata asked once per topic."""
        count = self._partitions.get(topic)
        if count is None:
            count = self._threads.run(topic, self.metadata_partition_count, topic)
        return count

    def check_partition(self, topic: str, partition: int) -> None:
        if not 0 <= partition < self.partition_count(topic):
            raise StorageError(f"{topic}: there is no partition {partition}")

    def forget_lost(self) -> None:
        """Forget the topics the broker no longer has, so that their next use asks for
        their metadata and is told they do not exist: a cluster back from an outage may
        have lost topics (Tansu keeps them in memory), and an append to one it still
        counted waited out its timeout for a 503, again and again. Nothing is forgotten
        when the broker does not answer."""
        try:
            found = self._fresh_topics()
        except StorageError:
            return
        for topic in [topic for topic in self._partitions if topic not in found]:
            del self._partitions[topic]

    def raise_if_gone(self, topic: str) -> None:
        """Raise ``TopicNotFound`` if the topic is gone (another process may have
        deleted it), asking the broker instead of the cache. Callers at once share
        a metadata request (it tells of every topic)."""
        self._partitions.pop(topic, None)
        self._remember(self._fresh_topics(), topic)

    def _fresh_topics(self) -> dict[str, TopicMetadata]:
        """The metadata of every topic, asked now; callers at once share the request."""
        return self._fresh.call(
            None, lambda: self._threads.run("the kafka broker", self._all_topics))

    def check(self, timeout: float = CHECK_TIMEOUT_S) -> None:
        """Raise ``StorageError`` when the broker does not answer within ``timeout``."""
        self._threads.run("the kafka broker", self._admin().list_topics, timeout=timeout)

    def close(self) -> None:
        self._admin_client = None

    # -- blocking, for pool threads ---------------------------------------------

    def metadata_partition_count(self, topic: str) -> int:
        """Ask the broker for the topic's metadata (blocking) and remember its partition count.

        Asks for all topics: a metadata request naming a topic lets a broker that
        auto-creates topics create it again right after it was deleted (Tansu does)."""
        return self._remember(self._all_topics(), topic)

    def _all_topics(self) -> dict[str, TopicMetadata]:
        """The metadata of every topic (blocking)."""
        return self._admin().list_topics(timeout=self._timeout).topics

    def _remember(self, metadata: Mapping[str, TopicMetadata], topic: str) -> int:
        """The topic's partition count in the metadata of all topics, remembered."""
        found = metadata.get(topic)
        if found is None:
            raise TopicNotFound(f"{topic}: the topic does not exist")
        if found.error is not None:
            raise storage_error(found.error, topic, self.storage)
        count = self._partitions[topic] = len(found.partitions)
        return count

    def list_offsets(self, topic: str, partitions: range
                     ) -> tuple[dict[int, int], dict[int, int]]:
        """The oldest offset and the end reported by ListOffsets of each partition (blocking)."""
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

    def latest_offsets(self, partitions: Iterable[tuple[str, int]], timeout: float
                       ) -> dict[tuple[str, int], int | Exception]:
        """The end ListOffsets reports for each (topic, partition), of any topics, in one
        request (blocking); a partition that got no answer maps to its exception."""
        futures = self._admin().list_offsets(
            {TopicPartition(topic, p): OffsetSpec.latest() for topic, p in partitions},
            request_timeout=timeout)
        ends: dict[tuple[str, int], int | Exception] = {}
        for asked, future in futures.items():
            try:
                ends[asked.topic, asked.partition] = future.result().offset
            except Exception as error:
                ends[asked.topic, asked.partition] = error
        return ends

    def _admin(self) -> AdminClient:
        self._threads.ensure_running()
        if self._admin_client is None:
            self._admin_client = self._clients.admin()
        return self._admin_client
