"""Append and read throughput of each storage engine, printed as a table.

    python -m tests.benchmarks.bench_storage [--seconds 3] [--engines postgres,kafka]

Starts its own local stack (PostgreSQL, ZooKeeper, the Kafka-protocol broker)
on free ports unless NAKADI_DATABASE_URL / NAKADI_KAFKA_BOOTSTRAP_SERVERS point
at running ones. Events are ~200-byte JSON documents. Appends run one
greenlet at a time ("1 appender") and eight at once on eight partitions
("8 appenders"); reads drain the partitions written with ``read`` (1000 per call)
and with a multi-partition ``reader``. On postgres it then compacts a topic of
``--compaction-events`` events of 10,000 keys (the first compaction, then another
after 5% more events) and prints how long each took, and the CPU it took this
process (the worker's share; PostgreSQL reads the keys).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import gevent
import psycopg2

from app.config import Settings
from app.domain.event_type import KEEP_FOREVER
from app.repository.database import ConnectionPool, make_green
from app.repository.storages import get_storage, register_local_storages
from app.storage.engine import BEFORE_FIRST, StorageEngine, count_events
from app.storage.engines import build_engine
from deploy.localstack import LocalStack, free_port
from sql.migrate import migrate

EVENT_SIZE = 200
PARTITIONS = 8


def event(n: int) -> bytes:
    body = {"metadata": {"eid": str(uuid.uuid4()), "occurred_at": "2026-11-22T12:00:00Z"},
            "order_number": f"ORDER-{n:08d}", "pad": ""}
    raw = json.dumps(body)
    body["pad"] = "x" * max(0, EVENT_SIZE - len(raw))
    return json.dumps(body).encode()


def bench_append(engine: StorageEngine, topic: str, batch: int, appenders: int,
                 seconds: float) -> tuple[float, int]:
    payloads = [event(n) for n in range(batch)]
    deadline = time.perf_counter() + seconds
    counts = [0] * appenders

    def appender(index: int) -> None:
        while time.perf_counter() < deadline:
            engine.append(topic, index % PARTITIONS, payloads)
            counts[index] += batch

    started = time.perf_counter()
    gevent.joinall([gevent.spawn(appender, i) for i in range(appenders)], raise_error=True)
    elapsed = time.perf_counter() - started
    return sum(counts) / elapsed, sum(counts)


def bench_read(engine: StorageEngine, topic: str) -> tuple[float, float, int]:
    bounds = engine.bounds(topic)
    started = time.perf_counter()
    total = 0
    for partition in bounds:
        after = BEFORE_FIRST
        while after < partition.newest:
            events = engine.read(topic, partition.partition, after, 1000)
            total += len(events)
            after = events[-1].offset
    read_rate = total / (time.perf_counter() - started)

    reader = engine.reader(topic, {b.partition: BEFORE_FIRST for b in bounds})
    started = time.perf_counter()
    streamed = 0
    while streamed < total:
        got = reader.poll(1000, timeout=1.0)
        if not got:
            break
        streamed += count_events(got)
    reader.close()
    return read_rate, streamed / (time.perf_counter() - started), total


def keyed_event(n: int, keys: int) -> bytes:
    body = json.loads(event(n))
    body["metadata"]["partition_compaction_key"] = f"key-{n % keys}"
    return json.dumps(body, separators=(",", ":")).encode()


def bench_compaction(engine: StorageEngine, events: int, keys: int = 10_000) -> None:
    topic = f"bench-compact-{uuid.uuid4().hex[:8]}"
    engine.create_topic(topic, 1, KEEP_FOREVER, compacted=True)
    try:
        appended = 0
        for more in (events, events // 20):
            for start in range(appended, appended + more, 1000):
                engine.append(topic, 0, [keyed_event(n, keys)
                                         for n in range(start, min(start + 1000, appended + more))])
            appended += more
            cpu, started = time.process_time(), time.perf_counter()
            removed = engine.compact(0)
            print(f"compaction of {appended:,} events ({more:,} new, {keys:,} keys):"
                  f" {removed:,} removed in {time.perf_counter() - started:.2f} s,"
                  f" {time.process_time() - cpu:.2f} s of this process's CPU", flush=True)
    finally:
        engine.delete_topic(topic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--engines", default="postgres,kafka")
    parser.add_argument("--compaction-events", type=int, default=200_000)
    args = parser.parse_args()

    stack = None
    env = {k: v for k, v in os.environ.items() if k.startswith("NAKADI_")}
    if "NAKADI_DATABASE_URL" not in env or "NAKADI_KAFKA_BOOTSTRAP_SERVERS" not in env:
        data_dir = Path(tempfile.mkdtemp(prefix="nakadi-bench-"))
        data_dir.chmod(0o755)
        stack = LocalStack(data_dir, free_port(), free_port(), free_port())
        env.update(stack.start(env))
    try:
        settings = Settings.from_env(env)
        conn = psycopg2.connect(settings.database_url)
        migrate(conn)
        conn.close()
        make_green()
        pool = ConnectionPool(settings.database_url, 20)
        register_local_storages(pool, settings)
        print(f"{'engine':9} {'appenders':>9} {'batch':>6} {'events/s':>10} {'MB/s':>7}"
              f" {'events':>8}")
        for name in args.engines.split(","):
            engine = build_engine(get_storage(pool, name), pool)
            topic = f"bench-{uuid.uuid4().hex[:8]}"
            engine.create_topic(topic, PARTITIONS, 3_600_000)
            try:
                for appenders in (1, 8):
                    for batch in (1, 100, 1000):
                        rate, count = bench_append(engine, topic, batch, appenders,
                                                   args.seconds)
                        print(f"{name:9} {appenders:>9} {batch:>6} {rate:>10,.0f}"
                              f" {rate * EVENT_SIZE / 1e6:>7.1f} {count:>8}", flush=True)
                read_rate, reader_rate, total = bench_read(engine, topic)
                print(f"{name:9} read (1000/call): {read_rate:,.0f} events/s;"
                      f" reader.poll(1000): {reader_rate:,.0f} events/s; {total:,} events",
                      flush=True)
                if engine.storage_type == "postgres" and args.compaction_events:
                    bench_compaction(engine, args.compaction_events)
            finally:
                engine.delete_topic(topic)
                engine.close()
        pool.close()
    finally:
        if stack is not None:
            stack.stop()
            shutil.rmtree(stack.data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
