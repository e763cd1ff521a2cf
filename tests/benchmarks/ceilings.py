"""What the broker's parts can do on their own, measured on the same services the broker
uses: PostgreSQL inserts with a durable commit per transaction, and confluent-kafka
producing (waiting for every batch's acknowledgements) and consuming with the
broker's client settings. ``bench_all`` puts each broker figure next to these.
"""

from __future__ import annotations

import threading
import time
import uuid

import gevent
import psycopg2
from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka.admin import NewTopic

from app.repository.database import make_green
from app.storage.kafka.clients import Clients
from tests.benchmarks.bench_publish import stored_event

PARTITIONS = 8


class PostgresInserts:
    """Events inserted a row each, ``batch`` rows per transaction, each committed durably
    (the server's own settings), from ``clients`` connections at once: PostgreSQL's rate
    for the events themselves, as the performance issue defines the ceiling (the broker
    stores a batch's events in one row of ``log_chunks`` since 2026-11-26). Connections
    stay open between measurements."""

    def __init__(self, dsn: str, batch: int, clients: int) -> None:
        make_green()  # the broker's client stack: psycopg2 waiting through gevent
        self._table = f"bench_ceiling_{uuid.uuid4().hex[:8]}"
        self._batch = batch
        self._conns = [psycopg2.connect(dsn) for _ in range(clients)]
        self._inserted = [0] * clients
        setup = self._conns[0]
        with setup, setup.cursor() as cursor:
            cursor.execute(
                f"CREATE TABLE {self._table} (topic_id bigint NOT NULL,"
                " partition integer NOT NULL, event_offset bigint NOT NULL,"
                " appended_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
                " payload bytea NOT NULL, PRIMARY KEY (topic_id, partition, event_offset))")
            # Rendered once: the client's own work is not what is measured.
            payloads = cursor.mogrify("%s::bytea[]", (
                [psycopg2.Binary(stored_event(n)) for n in range(batch)],)).decode()
        self._insert = (
            f"INSERT INTO {self._table} (topic_id, partition, event_offset, payload)"
            f" SELECT 1, %s, %s + o, p FROM unnest({payloads}) WITH ORDINALITY AS e (p, o)")

    def rate(self, seconds: float) -> float:
        """Rows/s over ``seconds``."""
        deadline = time.perf_counter() + seconds
        before = sum(self._inserted)

        def inserter(index: int) -> None:
            conn = self._conns[index]
            while time.perf_counter() < deadline:
                with conn, conn.cursor() as cursor:
                    cursor.execute(self._insert, (index, self._inserted[index]))
                self._inserted[index] += self._batch

        started = time.perf_counter()
        gevent.joinall([gevent.spawn(inserter, i) for i in range(len(self._conns))],
                       raise_error=True)
        return (sum(self._inserted) - before) / (time.perf_counter() - started)

    def close(self) -> None:
        setup = self._conns[0]
        with setup, setup.cursor() as cursor:
            cursor.execute(f"DROP TABLE {self._table}")
        for conn in self._conns:
            conn.close()


def _kafka_error(error: object) -> None:
    raise RuntimeError(f"kafka: {error}")


def create_kafka_topic(bootstrap: str) -> str:
    topic = f"bench-ceiling-{uuid.uuid4().hex[:8]}"
    admin = Clients(bootstrap, {}, _kafka_error).admin()  # alive until the topic exists
    futures = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])
    for future in futures.values():
        future.result(30)
    return topic


class KafkaProduce:
    """Events produced by ``clients`` producers (the broker's producer settings:
    idempotent, acks=all, but no lingering: a producer that waits for each batch gains
    nothing by it), each producing ``batch`` events and then waiting until all are
    acknowledged. Producers stay up, warmed, between measurements."""

    def __init__(self, bootstrap: str, topic: str, batch: int, clients: int) -> None:
        self._topic = topic
        self._payloads = [stored_event(n) for n in range(batch)]
        self._producers = [Clients(bootstrap, {"linger.ms": 0}, _kafka_error).producer(30)
                           for _ in range(clients)]
        for index in range(clients):
            self._produce_batch(index)  # metadata and producer id fetched before measuring

    def _produce_batch(self, index: int) -> None:
        producer = self._producers[index]
        for n, payload in enumerate(self._payloads):
            producer.produce(self._topic, payload, partition=(index + n) % PARTITIONS)
        if producer.flush(30) != 0:
            raise RuntimeError("kafka did not acknowledge a batch within 30 s")

    def rate(self, seconds: float) -> float:
        """Events/s over ``seconds``."""
        deadline = time.perf_counter() + seconds
        counts = [0] * len(self._producers)
        failures: list[BaseException] = []

        def produce(index: int) -> None:
            try:
                while time.perf_counter() < deadline:
                    self._produce_batch(index)
                    counts[index] += len(self._payloads)
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(len(counts))]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
        return sum(counts) / (time.perf_counter() - started)

    def close(self) -> None:
        self._producers.clear()


def kafka_consume_per_second(bootstrap: str, topic: str, count: int) -> float:
    """Events/s of one consumer (the broker's reader settings) reading ``count``
    events of every partition from the beginning."""
    assignment = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
    consumer = Clients(bootstrap, {}, _kafka_error).consumer(assignment, 100)
    received = 0
    started = 0.0  # from the first event: joining the partitions is not consuming
    try:
        while received < count:
            messages = consumer.consume(1000, 2.0)
            if not messages:
                break
            started = started or time.perf_counter()
            received += sum(1 for message in messages if message.error() is None)
    finally:
        consumer.close()
    return received / (time.perf_counter() - started)
