"""What the broker's parts can do on their own, measured on the same services the broker
uses: PostgreSQL inserts with a durable commit per transaction, and confluent-kafka
producing (waiting for every batch's acknowledgements) and consuming with the
broker's client settings. ``bench_all`` puts each broker figure next to these.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import gevent
import psycopg2
from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka.admin import NewTopic

from app.repository.database import make_green
from app.storage.kafka.clients import Clients
from tests.benchmarks.noop_app import stored_event

PARTITIONS = 8


def postgres_rows_per_second(dsn: str, batch: int, seconds: float, clients: int) -> float:
    """Rows/s inserted into a table shaped like the log's, ``batch`` rows per
    transaction, each committed durably (the server's own settings), from ``clients``
    connections at once."""
    make_green()  # the broker's client stack: psycopg2 waiting through gevent
    table = f"bench_ceiling_{uuid.uuid4().hex[:8]}"
    setup = psycopg2.connect(dsn)
    setup.autocommit = True
    with setup.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {table} (LIKE log_events INCLUDING ALL)")
    with setup.cursor() as cursor:  # rendered once: the client's work is not measured
        payloads = cursor.mogrify(
            "%s::bytea[]", ([psycopg2.Binary(stored_event(n)) for n in range(batch)],)).decode()
    insert = (f"INSERT INTO {table} (topic_id, partition, event_offset, payload)"
              f" SELECT 1, %s, %s + o, p FROM unnest({payloads}) WITH ORDINALITY AS e (p, o)")
    counts = [0] * clients
    deadline = time.perf_counter() + seconds

    def inserter(index: int) -> None:
        conn = psycopg2.connect(dsn)
        try:
            while time.perf_counter() < deadline:
                with conn, conn.cursor() as cursor:
                    cursor.execute(insert, (index, counts[index]))
                counts[index] += batch
        finally:
            conn.close()

    started = time.perf_counter()
    gevent.joinall([gevent.spawn(inserter, i) for i in range(clients)], raise_error=True)
    elapsed = time.perf_counter() - started
    with setup.cursor() as cursor:
        cursor.execute(f"DROP TABLE {table}")
    setup.close()
    return sum(counts) / elapsed


def _kafka_error(error: object) -> None:
    raise RuntimeError(f"kafka: {error}")


def create_kafka_topic(bootstrap: str) -> str:
    topic = f"bench-ceiling-{uuid.uuid4().hex[:8]}"
    admin = Clients(bootstrap, {}, _kafka_error).admin()  # alive until the topic exists
    futures = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])
    for future in futures.values():
        future.result(30)
    return topic


def kafka_produce_per_second(bootstrap: str, topic: str, batch: int, seconds: float,
                             clients: int) -> float:
    """Events/s produced by ``clients`` producers (the broker's producer settings:
    idempotent, acks=all), each producing ``batch`` events and then waiting until
    all are acknowledged."""
    payloads = [stored_event(n) for n in range(batch)]
    counts = [0] * clients
    failures: list[BaseException] = []
    deadline = time.perf_counter() + seconds

    def producer(index: int) -> None:
        client = Clients(bootstrap, {}, _kafka_error).producer(30)
        try:
            while time.perf_counter() < deadline:
                for n, payload in enumerate(payloads):
                    client.produce(topic, payload, partition=(index + n) % PARTITIONS)
                if client.flush(30) != 0:
                    raise RuntimeError("kafka did not acknowledge a batch within 30 s")
                counts[index] += batch
        except BaseException as error:
            failures.append(error)

    rate = _threads_rate(producer, clients, counts)
    if failures:
        raise failures[0]
    return rate


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


def _threads_rate(target: Callable[[int], None], clients: int, counts: list[int]) -> float:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)
