"""Low-level streaming throughput and end-to-end latency against a real gunicorn.

    python -m tests.benchmarks.bench_stream [--events 1000000] [--rate 200]
        [--seconds 20] [--idle-streams 2000] [--engines postgres,kafka]

For each engine it prints:
- throughput: events/s and MB/s of one stream from ``begin`` over ``--events``
  pre-published events as publishing stores them (~400 bytes, ~250 sent) with
  batch_limit=1000, then with batch_limit=1 (Nakadi's default: a line per event);
- latency: a producer posts single events over HTTP at ``--rate`` events/s
  while a stream with batch_limit=1 reads them, a chunk at a time; p50/p99/max
  from the moment the producer sent an event to the moment its batch arrived;
- idle streams (first engine only): ``--idle-streams`` low-level streams from
  the end of quiet one-partition event types (10 on each, the default limit per
  partition) opened at once on ONE gunicorn worker: the time
  until all have started, the worker's memory per stream, and how late their
  keep-alives (batch_flush_timeout 2 s) come over the 12 s after that.

Starts its own PostgreSQL, ZooKeeper and Kafka-protocol broker on free ports
unless NAKADI_* addresses are set.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import threading
import time
from collections.abc import Callable

import orjson
import requests

from app.config import Settings
from app.repository.database import ConnectionPool, make_green
from app.repository.event_types import event_type_with_timelines
from app.repository.storages import get_storage
from app.storage.engines import build_engine
from tests.benchmarks.bench_publish import (
    AUTH_HEADERS,
    create_event_type,
    order_event,
    stored_event,
)
from tests.benchmarks.harness import (
    delete_event_types,
    running_broker,
    set_default_storage,
    settle_writes,
)
from tests.benchmarks.idle_streams import IdleStreams, idle_streams


def prepublish(settings: Settings, name: str, storage_id: str, count: int) -> int:
    """Append ``count`` events straight to the event type's topic, as publishing them
    would have stored them (``stored_event``), written out to disk
    (``settle_writes``); returns their bytes."""
    make_green()
    pool = ConnectionPool(settings.database_url, 4)
    timeline = event_type_with_timelines(pool, name)[1].active
    engine = build_engine(get_storage(pool, storage_id), pool)
    payloads = {p: [stored_event(n, name, p) for n in range(1000)] for p in range(8)}
    try:
        for start in range(0, count, 8000):
            engine.append_many(timeline.topic, {p: payloads[p] for p in range(8)
                                                if start + p * 1000 < count})
    finally:
        engine.close()
        pool.close()
    settle_writes(settings.database_url)
    return sum(len(payload) for payload in payloads[0]) * count // 1000


def stream_throughput(port: int, name: str, count: int, batch_limit: int = 1000,
                      partitions: int = 8) -> tuple[float, float]:
    """Events/s and MB/s of one stream reading ``count`` events from begin."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    cursors = json.dumps([{"partition": str(p), "offset": "begin"} for p in range(partitions)])
    started = time.perf_counter()
    conn.request("GET", f"/event-types/{name}/events?batch_limit={batch_limit}"
                        f"&stream_limit={count}&batch_flush_timeout=1",
                 headers={"X-Nakadi-Cursors": cursors})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(response.read().decode())
    received = read_to_end(response)
    elapsed = time.perf_counter() - started
    conn.close()
    return count / elapsed, received / elapsed / 1e6


def read_to_end(response: http.client.HTTPResponse) -> int:
    """Reads a stream to its end without parsing it; the bytes received."""
    received = 0
    while chunk := response.read1(1 << 20):
        received += len(chunk)
    return received


def publish_paced(port: int, name: str, rate: float, seconds: float,
                  sent_at: dict[str, float]) -> None:
    """Single events published at ``rate`` per second for ``seconds``; each one's send
    time goes into ``sent_at`` by its eid.

    Each event has an order number of its own, so that they spread over the
    partitions as a business key's events do. With one key they all went to one
    partition, where Tansu's fetches slow down as it fills (one partition at 200
    events/s: p50 9 ms in the first 10 s, 35 ms after a minute), a slowdown that
    Apache Kafka's offset index avoids."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    due = time.perf_counter()
    end = due + seconds
    sent = 0
    while due < end:
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        event = order_event(sent)
        sent += 1
        sent_at[event["metadata"]["eid"]] = time.perf_counter()
        conn.request("POST", f"/event-types/{name}/events", orjson.dumps([event]),
                     {"Content-Type": "application/json"})
        conn.getresponse().read()
        due += 1 / rate
    conn.close()


READ_SIZE = 1 << 16
"""The most the latency client reads at once."""


def end_to_end_latency(port: int, name: str, rate: float, seconds: float) -> list[float]:
    """Milliseconds from each single-event publish to the arrival of its batch."""
    sent_at: dict[str, float] = {}
    latencies: list[float] = []
    stop = threading.Event()
    stream = requests.get(f"http://127.0.0.1:{port}/event-types/{name}/events",
                          params={"batch_limit": 1, "batch_flush_timeout": 1},
                          stream=True, timeout=30)

    def consume() -> None:
        # Closing the stream from the main thread ends the read with an error: expected.
        with contextlib.suppress(requests.RequestException, AttributeError):
            # A chunked body's chunks come out whole as they arrive (urllib3's
            # read_chunked), so a large chunk_size waits for nothing; reading a byte a
            # call cost the client 2-4 ms a line, counted as the broker's latency.
            for line in stream.iter_lines(chunk_size=READ_SIZE):
                arrived = time.perf_counter()
                for event in json.loads(line).get("events", []):
                    latencies.append((arrived - sent_at[event["metadata"]["eid"]]) * 1000)
                if stop.is_set():
                    return

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    time.sleep(1)
    publish_paced(port, name, rate, seconds, sent_at)
    time.sleep(1)
    stop.set()
    stream.close()
    return sorted(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=200.0, help="events/s for latency")
    parser.add_argument("--seconds", type=float, default=20.0, help="latency run length")
    parser.add_argument("--idle-streams", type=int, default=2000, help="0 to skip")
    parser.add_argument("--engines", default="postgres,kafka")
    args = parser.parse_args()

    with running_broker() as (env, port, _):
        settings = Settings.from_env(env)
        base_url = f"http://127.0.0.1:{port}"
        for engine in args.engines.split(","):
            set_default_storage(settings.database_url, engine)
            name = create_event_type(base_url)
            size = prepublish(settings, name, engine, args.events)
            for batch_limit in (1000, 1):
                rate, megabytes = stream_throughput(port, name, args.events, batch_limit)
                print(f"{engine:9} stream from begin, batch_limit {batch_limit}:"
                      f" {rate:,.0f} events/s, {megabytes:.1f} MB/s ({args.events:,} events"
                      f" of ~{size // args.events} bytes)", flush=True)
            name = create_event_type(base_url)
            latencies = end_to_end_latency(port, name, args.rate, args.seconds)
            if not latencies:
                raise RuntimeError("no event arrived")
            print(f"{engine:9} publish -> stream at {args.rate:.0f} events/s, batch_limit 1:"
                  f" p50 {latencies[len(latencies) // 2]:.1f} ms,"
                  f" p99 {latencies[int(len(latencies) * 0.99)]:.1f} ms,"
                  f" max {latencies[-1]:.1f} ms ({len(latencies)} events)", flush=True)
        if args.idle_streams:
            idle = idle_low_level_streams(env, args.engines.split(",")[0], args.idle_streams)
            print(idle.describe(args.idle_streams, "low-level streams"), flush=True)


def idle_low_level_streams(env: dict[str, str], engine: str, count: int) -> IdleStreams:
    """``idle_streams`` of ``count`` low-level streams of event types on ``engine``; new
    event types go to postgres again afterwards."""
    set_default_storage(env["NAKADI_DATABASE_URL"], engine)
    names: list[str] = []
    try:
        return idle_streams(env, count, low_level_paths(count, names), lambda base_url:
                            delete_event_types(base_url, names, env["NAKADI_DATABASE_URL"],
                                               AUTH_HEADERS))
    finally:
        set_default_storage(env["NAKADI_DATABASE_URL"], "postgres")


def low_level_paths(count: int, names: list[str]) -> Callable[[str], list[str]]:
    """``count`` streams from the end of new one-partition event types, as many on each
    as a partition allows by default (NAKADI_MAX_STREAMS_PER_PARTITION); the event
    types' names go to ``names``."""
    per_event_type = Settings.from_env({}).max_streams_per_partition

    def paths(base_url: str) -> list[str]:
        names.extend(create_event_type(base_url, partitions=1)
                     for _ in range(-(-count // per_event_type)))
        return [f"/event-types/{names[n // per_event_type]}/events" for n in range(count)]
    return paths


if __name__ == "__main__":
    main()
