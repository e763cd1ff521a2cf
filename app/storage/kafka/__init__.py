"""The ``kafka`` storage engine: topics in Apache Kafka (or a broker speaking its
protocol), through confluent-kafka.

gevent and librdkafka: every librdkafka call that can wait (``poll``, ``flush``,
``consume`` with a timeout, admin futures, metadata) blocks the whole gevent hub,
so it runs in the engine's own pool of native threads (``threads``), never on
the hub. Results cross back to greenlets through the pool's async watcher, or,
for delivery reports, through ``loop.run_callback_threadsafe``: gevent's events
are not safe to set from another thread.

The modules, one job each:

- ``engine``: ``KafkaEngine``, the ``StorageEngine`` that ties the others together
- ``threads``: the native thread pool that runs blocking calls for greenlets
- ``clients``: librdkafka clients as the engine configures them, and what their
  answers mean (errors, records, watermarks)
- ``client_properties``: the properties file that says how to reach a Kafka that
  needs TLS or SASL
- ``topics``: creating and deleting topics, partition counts from metadata
- ``producer``: appends, one idempotent producer and its delivery-report thread
- ``reader``: ``KafkaStreamReader``, a consumer over several partitions
- ``idle``: ``IdleReaders``, where readers without events wait without a consumer
- ``bounds``: the oldest and newest offset of each partition
"""

from app.storage.kafka.engine import KafkaEngine

__all__ = ["KafkaEngine"]
