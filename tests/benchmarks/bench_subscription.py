"""Subscription streams against a real gunicorn, each figure next to its reference
measured in the same run (machines here vary up to 2x from one run to the next).

    python -m tests.benchmarks.bench_subscription [--events 300000] [--rate 200]
        [--seconds 20] [--idle-streams 1000] [--max-uncommitted 2000,20000]
        [--rounds 3] [--warm-up 8] [--commits 2000] [--group 64] [--engines postgres,kafka]

For each engine it prints:
- throughput: events/s of one subscription stream from ``begin`` over
  ``--events`` pre-published events as publishing stores them (~400 bytes), for
  each ``--max-uncommitted`` (the stream pauses at that many uncommitted events,
  so its rate is at most that window per commit round trip), batch_limit 100,
  the client committing every batch (from a second thread, so reading goes on
  while a commit is under way; batches that arrived during a commit are
  committed together by their newest cursor per partition); each run paired with
  one of the low-level stream over the same events with the same batch_limit,
  ``--rounds`` times: the median share and each round's, the commits' p50/p99
  latency, the gunicorn workers' CPU seconds per million events for each stream,
  and ZooKeeper's for the subscription stream when it runs on this machine. Like
  the low-level stream's client, the subscription's leaves the events unparsed:
  it finds each line's end and reads the cursor at its start (to commit it), and
  counts the events from the last cursors;
- lines: events/s of a subscription stream from ``begin`` over the same events
  with batch_limit 1 (Nakadi's default, a line per event) and a
  max_uncommitted_events that covers them all, so no commit is needed;
- commit cost (measured first, as its commits also warm ZooKeeper up: its CPU
  per commit halves over the first few thousand while the JVM compiles, and a
  ZooKeeper that has run for a while is warm; then at least ``--warm-up`` untimed
  subscription streams over the events at the smallest window, more until
  ZooKeeper's JIT compilers settle, see ``warm_up``): ``--commits`` commits sent one
  after another, each moving one partition of an open stream forward by one
  event, then as many moving 8 partitions each: commits/s, p50/p99 latency and
  the workers' CPU per commit (the request, ZooKeeper's round trip and watch,
  and the stream's wake-up), which sets how much a stream that commits often
  pays on top of the low-level stream, and ZooKeeper's own CPU per commit when
  it runs on this machine (it shares the cores with the workers here);
- latency: single events published over HTTP at ``--rate`` events/s to a
  subscription stream with batch_limit 1 whose client commits the same way;
  p50/p99 from the publish to the arrival of the event;
- commits from elsewhere: 300 commits sent to a second instance (one worker), each
  right after a one-event publish reached the stream: p50/p90/p99 latency (that
  instance knows nothing of what the stream read, and asks the storage);
- rebalance: with one stream receiving events, the time from a second stream's
  request until both streams have received events;
- consumer group: ``--group`` streams opened at once on one subscription of an
  event type with as many partitions (no events, batch_flush_timeout 1 s): the
  time until every stream has its response headers, and until every stream has
  sent a line with a cursor, a keep-alive of a partition it holds;
- idle streams (first engine only): ``--idle-streams`` subscription streams
  opened at once on ONE gunicorn worker: the time until all have started, the
  worker's memory per stream, and how late their keep-alives (batch_flush_timeout
  2 s) come over the 12 s after that.

Starts its own PostgreSQL, ZooKeeper and Kafka-protocol broker on free ports
unless NAKADI_* addresses are set.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import queue
import selectors
import socket
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import orjson
import requests

from app.config import Settings
from tests.benchmarks.bench_publish import create_event_type, order_event, workers_cpu_s
from tests.benchmarks.bench_stream import (
    prepublish,
    publish_paced,
    read_to_end,
    stream_throughput,
)
from tests.benchmarks.harness import (
    percentile,
    running_broker,
    set_default_storage,
    start_server,
    stop_server,
    zookeeper_compiler_cpu_s,
    zookeeper_cpu_s,
)
from tests.benchmarks.idle_streams import idle_streams

PARTITIONS = 8

T = TypeVar("T")


def create_subscription(base_url: str, event_type: str, read_from: str = "begin") -> str:
    response = requests.post(base_url + "/subscriptions", json={
        "owning_application": "bench", "event_types": [event_type],
        "consumer_group": f"bench-{uuid.uuid4().hex[:8]}", "read_from": read_from})
    response.raise_for_status()
    return response.json()["id"]


class SubscriptionClient:
    """A pyNakadi-style consumer: one streaming connection and one for commits."""

    def __init__(self, port: int, subscription_id: str, **params: int) -> None:
        self.subscription_id = subscription_id
        self._stream = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self._commits = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        query = "&".join(f"{key}={value}" for key, value in params.items())
        self._stream.request("GET", f"/subscriptions/{subscription_id}/events?{query}")
        self.response = self._stream.getresponse()
        if self.response.status != 200:
            raise RuntimeError(f"{self.response.status}: {self.response.read().decode()}")
        self.stream_id = self.response.getheader("X-Nakadi-StreamId")

    def batches(self) -> Iterator[dict]:
        """Each batch as it arrives, until the server ends the stream."""
        while line := self.response.readline():
            if line.strip():
                yield orjson.loads(line)

    def cursors(self) -> Iterator[dict]:
        """The cursor of each batch with events as it arrives. The events are left
        unparsed and uncounted, as the low-level stream's benchmark leaves them: only
        each line's end is searched for and the cursor at its start read, since this
        client's CPU is taken from the same two cores as the server's."""
        rest = b""
        while chunk := self.response.read1(1 << 20):
            data = rest + chunk if rest else chunk
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                # A line starts with its cursor: {"cursor":{...},"events":[...
                events = data.find(b',"events":[', start, end)
                if events > 0:
                    yield orjson.loads(data[start + len(b'{"cursor":'):events])
                start = end + 1
            rest = data[start:]

    def commit(self, cursors: list[dict]) -> None:
        self._commits.request(
            "POST", f"/subscriptions/{self.subscription_id}/cursors",
            orjson.dumps({"items": cursors}),
            {"Content-Type": "application/json", "X-Nakadi-StreamId": self.stream_id})
        answer = self._commits.getresponse()
        body = answer.read()
        if answer.status not in (200, 204):
            raise RuntimeError(f"commit: {answer.status} {body.decode()}")

    def close(self) -> None:
        self._stream.close()
        self._commits.close()


class Committer:
    """Commits from its own thread, as a client that keeps reading while it commits does.
    When batches came faster than a commit takes, it commits the newest cursor, which
    commits every batch before it too (commits are cumulative per partition). Records
    each commit's latency (ms)."""

    def __init__(self, client: SubscriptionClient) -> None:
        self._client = client
        self._queue: queue.Queue[dict | None] = queue.Queue()
        self.latencies: list[float] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def commit(self, cursor: dict) -> None:
        self._queue.put(cursor)

    def _run(self) -> None:
        with contextlib.suppress(OSError, http.client.HTTPException):
            while (cursor := self._queue.get()) is not None:
                newest = {cursor["partition"]: cursor}
                with contextlib.suppress(queue.Empty):
                    while (more := self._queue.get_nowait()) is not None:
                        newest[more["partition"]] = more
                    self._queue.put(None)  # the end came with the others: keep it
                started = time.perf_counter()
                self._client.commit(list(newest.values()))
                self.latencies.append((time.perf_counter() - started) * 1000)

    def finish(self) -> list[float]:
        """Waits for the queued commits; their latencies, sorted."""
        self._queue.put(None)
        self._thread.join(60)
        return sorted(self.latencies)


def low_level_throughput(port: int, name: str, count: int) -> float:
    """Events/s of a low-level stream from begin with batch_limit 100."""
    return stream_throughput(port, name, count, batch_limit=100, partitions=PARTITIONS)[0]


@dataclass(frozen=True)
class CpuSpent:
    """CPU seconds spent while a measurement ran."""

    workers: float
    zookeeper: float | None  # None: ZooKeeper runs on another machine


def with_cpu(port: int, zookeeper: str | None, measure: Callable[[], T]
             ) -> tuple[T, CpuSpent]:
    """What ``measure`` returns, and the CPU the workers spent meanwhile and, when
    ``zookeeper`` names its address, ZooKeeper."""
    def zookeeper_now() -> float | None:
        return None if zookeeper is None else zookeeper_cpu_s(zookeeper)

    workers, zookeeper_s = workers_cpu_s(port), zookeeper_now()
    result = measure()
    zookeeper_after = zookeeper_now()
    return result, CpuSpent(workers_cpu_s(port) - workers,
                            None if zookeeper_s is None or zookeeper_after is None
                            else zookeeper_after - zookeeper_s)


def subscription_throughput(port: int, base_url: str, name: str, count: int,
                            max_uncommitted: int) -> tuple[float, list[float]]:
    """Events/s of a subscription stream from begin, committing every batch, and the
    commits' latencies."""
    client = SubscriptionClient(port, create_subscription(base_url, name), batch_limit=100,
                                stream_limit=count, max_uncommitted_events=max_uncommitted)
    committer = Committer(client)
    started = time.perf_counter()
    reached = {}
    for cursor in client.cursors():
        reached[cursor["partition"]] = cursor["offset"]
        committer.commit(cursor)
    elapsed = time.perf_counter() - started
    latencies = committer.finish()
    client.close()
    # Offsets count from 0 in a new event type's first timeline (here "001-0001-<n>").
    received = sum(int(offset.rsplit("-", 1)[1]) + 1 for offset in reached.values())
    if received != count:
        raise RuntimeError(f"received {received} of {count} events")
    return count / elapsed, latencies


WARM_UP_LIMIT_S = 150.0
"""The longest ``warm_up`` goes on past its ``cycles`` for ZooKeeper's JIT."""

QUIET_COMPILING = 0.05
"""ZooKeeper's JIT is taken as settled once its compiler threads used less CPU than this
share of two cycles' time in a row."""


def warm_up(port: int, base_url: str, name: str, count: int, window: int, cycles: int,
            zookeeper: str) -> int:
    """Untimed subscription streams over the events, each a whole cycle (subscription
    created, streamed from begin with commits, ended): ``cycles`` of them, and when
    ZooKeeper runs on this machine, more until its JIT compilers have settled (for at
    most ``WARM_UP_LIMIT_S``). Returns how many ran.

    A fresh ZooKeeper's JIT compiles, and recompiles, its request paths over its first
    few thousand commits, with up to a core (2026-11-26, kafka, window 20,000, twenty
    cycles in a row: ZooKeeper's CPU per cycle fell from 150-220 ms to 60-110 ms).
    Eight cycles at a window of 20,000 were ~400 commits: its compilers then still took
    ~30% of a core through the rounds at 2,000 that followed (2026-11-27, night). A
    production ZooKeeper has long been warm, and shares no cores with the broker."""
    deadline = time.monotonic() + WARM_UP_LIMIT_S
    done = quiet = 0
    compiled, started = zookeeper_compiler_cpu_s(zookeeper), time.monotonic()
    while done < cycles or (quiet < 2 and time.monotonic() < deadline):
        subscription_throughput(port, base_url, name, count, window)
        done += 1
        compiled_after, ended = zookeeper_compiler_cpu_s(zookeeper), time.monotonic()
        if compiled is None or compiled_after is None:  # it runs elsewhere
            quiet = 2
        elif compiled_after - compiled < QUIET_COMPILING * (ended - started):
            quiet += 1
        else:
            quiet = 0
        compiled, started = compiled_after, ended
    return done


@dataclass(frozen=True)
class PairedRounds:
    """Paired runs of the low-level stream and the subscription stream over the same
    events: each round's rates, the workers' CPU per 1M events, and every commit's
    latency (ms, sorted)."""

    low: list[float]
    sub: list[float]
    low_cpu: list[float]
    sub_cpu: list[float]
    commits: list[float]
    sub_zookeeper_cpu: list[float]  # empty when ZooKeeper runs elsewhere

    @property
    def shares(self) -> list[float]:
        return [rate / reference for rate, reference in zip(self.sub, self.low, strict=True)]

    @property
    def share(self) -> float:
        """The median round's share: one reference per round, measured next to it."""
        return statistics.median(self.shares)

    @property
    def rate(self) -> float:
        """The subscription stream's median events/s."""
        return statistics.median(self.sub)

    @property
    def reference(self) -> float:
        """The low-level stream's median events/s."""
        return statistics.median(self.low)

    def describe(self) -> str:
        rounds = len(self.low)
        return (f"{self.share:.0%} of the low-level stream (rounds: "
                + ", ".join(f"{share:.0%}" for share in self.shares)
                + f"); median {self.rate:,.0f} events/s against"
                f" {self.reference:,.0f}; {len(self.commits) // rounds} commits a"
                f" round, p50 {percentile(self.commits, 0.5):.1f} ms, p99"
                f" {percentile(self.commits, 0.99):.1f} ms; workers' CPU per 1M events"
                f" {statistics.median(self.sub_cpu):.2f} s (low-level"
                f" {statistics.median(self.low_cpu):.2f} s)"
                + (f", ZooKeeper's {statistics.median(self.sub_zookeeper_cpu):.2f} s"
                   if self.sub_zookeeper_cpu else ""))


def throughput_rounds(port: int, base_url: str, name: str, count: int, window: int,
                      rounds: int, zookeeper: str) -> PairedRounds:
    """``rounds`` paired runs of the low-level stream and the subscription stream."""
    low, sub, low_cpu, sub_cpu, commits, sub_zookeeper_cpu = [], [], [], [], [], []
    for _ in range(rounds):
        reference, cpu = with_cpu(port, None, partial(low_level_throughput, port, name, count))
        low.append(reference)
        low_cpu.append(cpu.workers * 1e6 / count)
        (rate, latencies), cpu = with_cpu(port, zookeeper, partial(
            subscription_throughput, port, base_url, name, count, window))
        sub.append(rate)
        sub_cpu.append(cpu.workers * 1e6 / count)
        if cpu.zookeeper is not None:
            sub_zookeeper_cpu.append(cpu.zookeeper * 1e6 / count)
        commits += latencies
    return PairedRounds(low, sub, low_cpu, sub_cpu, sorted(commits), sub_zookeeper_cpu)


def line_throughput(port: int, base_url: str, name: str, count: int) -> float:
    """Events/s of a subscription stream from begin with batch_limit 1 (Nakadi's default:
    a line per event) whose max_uncommitted_events covers it, so it needs no commit."""
    client = SubscriptionClient(port, create_subscription(base_url, name), batch_limit=1,
                                stream_limit=count, max_uncommitted_events=count)
    started = time.perf_counter()
    read_to_end(client.response)
    elapsed = time.perf_counter() - started
    client.close()
    return count / elapsed


@dataclass(frozen=True)
class CommitCost:
    per_s: float
    latencies: list[float]  # ms
    workers_ms: float  # CPU per commit
    zookeeper_ms: float | None  # CPU per commit; None when ZooKeeper runs elsewhere


def commit_cost(port: int, base_url: str, name: str, count: int, width: int,
                zookeeper: str) -> CommitCost:
    """Commits/s, the latencies and the CPU per commit of ``count`` commits sent one
    after another, each one event further in ``width`` partitions of a new
    subscription's stream over ``name``, whose partitions hold ``count`` events each
    or more (batch_limit 1; the stream has sent them all before the first commit, so
    a commit costs no streaming)."""
    client = SubscriptionClient(port, create_subscription(base_url, name), batch_limit=1,
                                max_uncommitted_events=commit_cost_events(count))
    by_partition: dict[str, list[dict]] = {}
    for batch in client.batches():
        if batch.get("events"):
            by_partition.setdefault(batch["cursor"]["partition"], []).append(batch["cursor"])
            full = [cursors for cursors in by_partition.values() if len(cursors) >= count]
            if len(full) == width:
                break
    commits = [[cursors[n] for cursors in full] for n in range(count)]
    latencies: list[float] = []

    def commit_each() -> float:
        started = time.perf_counter()
        for cursors in commits:
            sent = time.perf_counter()
            client.commit(cursors)
            latencies.append((time.perf_counter() - sent) * 1000)
        return time.perf_counter() - started

    elapsed, cpu = with_cpu(port, zookeeper, commit_each)
    client.close()
    return CommitCost(count / elapsed, latencies, cpu.workers * 1000 / count,
                      None if cpu.zookeeper is None else cpu.zookeeper * 1000 / count)


def commit_cost_events(count: int) -> int:
    """The events ``prepublish`` appends so that each partition holds ``count`` or more."""
    return PARTITIONS * 1000 * -(-count // 1000)


def end_to_end_latency(port: int, base_url: str, name: str, rate: float,
                       seconds: float) -> list[float]:
    """Milliseconds from each single-event publish to its arrival on a committing
    subscription stream with batch_limit 1."""
    client = SubscriptionClient(port, create_subscription(base_url, name, "end"),
                                batch_limit=1, batch_flush_timeout=1,
                                max_uncommitted_events=1000)
    committer = Committer(client)
    sent_at: dict[str, float] = {}
    latencies: list[float] = []

    def consume() -> None:
        with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
            for batch in client.batches():
                arrived = time.perf_counter()
                for event in batch.get("events", []):
                    latencies.append((arrived - sent_at[event["metadata"]["eid"]]) * 1000)
                if batch.get("events"):
                    committer.commit(batch["cursor"])

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    publish_paced(port, name, rate, seconds, sent_at)
    time.sleep(1)
    committer.finish()
    client.close()
    consumer.join(5)
    return sorted(latencies)


def commits_from_elsewhere(port: int, other_port: int, base_url: str, name: str,
                           count: int) -> list[float]:
    """Milliseconds of ``count`` commits sent to another instance (``other_port``) than
    the one running the stream, each right after a one-event publish reached the
    stream: an instance behind a load balancer that knows nothing of what the stream
    read asks the storage whether the cursor exists."""
    client = SubscriptionClient(port, create_subscription(base_url, name, "end"),
                                batch_limit=1, batch_flush_timeout=1)
    publisher = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    elsewhere = http.client.HTTPConnection("127.0.0.1", other_port, timeout=60)
    batches = client.batches()
    latencies = []
    for n in range(count):
        publisher.request("POST", f"/event-types/{name}/events", orjson.dumps([order_event(n)]),
                          {"Content-Type": "application/json"})
        publisher.getresponse().read()
        cursor = next(batch for batch in batches if batch.get("events"))["cursor"]
        started = time.perf_counter()
        elsewhere.request("POST", f"/subscriptions/{client.subscription_id}/cursors",
                          orjson.dumps({"items": [cursor]}),
                          {"Content-Type": "application/json",
                           "X-Nakadi-StreamId": client.stream_id})
        answer = elsewhere.getresponse()
        answer.read()
        if answer.status != 204:
            raise RuntimeError(f"commit on the other instance: {answer.status}")
        latencies.append((time.perf_counter() - started) * 1000)
    client.close()
    publisher.close()
    elsewhere.close()
    return sorted(latencies)


def rebalance_time(port: int, base_url: str, name: str) -> float:
    """Seconds from a second stream's request until both streams received events,
    while events keep coming to every partition."""
    subscription = create_subscription(base_url, name, "end")
    stop = threading.Event()
    got_events: dict[str, float] = {}

    def publish() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        while not stop.is_set():
            batch = orjson.dumps([order_event(n) for n in range(PARTITIONS * 4)])
            conn.request("POST", f"/event-types/{name}/events", batch,
                         {"Content-Type": "application/json"})
            conn.getresponse().read()
            time.sleep(0.01)
        conn.close()

    def consume(label: str, client: SubscriptionClient) -> None:
        # RuntimeError: a commit refused because the measurement closed the stream.
        with contextlib.suppress(OSError, http.client.HTTPException, ValueError, RuntimeError):
            for batch in client.batches():
                if batch.get("events"):
                    got_events.setdefault(label, time.perf_counter())
                    client.commit([batch["cursor"]])
                if stop.is_set():
                    return

    producer = threading.Thread(target=publish, daemon=True)
    producer.start()
    first = SubscriptionClient(port, subscription, batch_limit=10, batch_flush_timeout=1)
    threading.Thread(target=consume, args=("first", first), daemon=True).start()
    while "first" not in got_events:
        time.sleep(0.01)
    joined = time.perf_counter()
    got_events.pop("first")
    second = SubscriptionClient(port, subscription, batch_limit=10, batch_flush_timeout=1)
    threading.Thread(target=consume, args=("second", second), daemon=True).start()
    deadline = joined + 30
    while len(got_events) < 2 and time.perf_counter() < deadline:
        time.sleep(0.005)
    stop.set()
    first.close()
    second.close()
    if len(got_events) < 2:
        raise RuntimeError("the streams did not both receive events within 30 s")
    return max(got_events.values()) - joined


def subscription_paths(count: int) -> Callable[[str], list[str]]:
    """``count`` fresh subscriptions of a new one-partition event type, read from its end."""
    def paths(base_url: str) -> list[str]:
        name = create_event_type(base_url, partitions=1)
        return [f"/subscriptions/{create_subscription(base_url, name, 'end')}/events"
                for _ in range(count)]
    return paths


def group_start(port: int, base_url: str, count: int) -> tuple[float, float]:
    """Seconds until ``count`` streams opened at once on one subscription of a new
    ``count``-partition event type all had their headers, and until each had sent a
    line with a cursor (a keep-alive of a partition it holds)."""
    subscription = create_subscription(base_url, create_event_type(base_url, count), "end")
    selector = selectors.DefaultSelector()
    received: dict[socket.socket, bytes] = {}
    started = time.perf_counter()
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(f"GET /subscriptions/{subscription}/events?batch_flush_timeout=1"
                     " HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        received[sock] = b""
    headers: dict[socket.socket, float] = {}
    holding: dict[socket.socket, float] = {}
    try:
        while len(holding) < count and time.perf_counter() < started + 60:
            for key, _ in selector.select(timeout=0.5):
                sock = key.fileobj  # type: ignore[assignment]
                data = sock.recv(65536)
                now = time.perf_counter() - started
                if not data:
                    raise RuntimeError(f"a stream ended: {received[sock][-300:]!r}")
                received[sock] += data
                if sock not in headers and b"\r\n\r\n" in received[sock]:
                    if not received[sock].startswith(b"HTTP/1.1 200"):
                        raise RuntimeError(f"a stream was refused: {received[sock][:300]!r}")
                    headers[sock] = now
                if sock not in holding and b'"cursor"' in received[sock]:
                    holding[sock] = now
                    selector.unregister(sock)
    finally:
        for sock in received:
            sock.close()
    if len(holding) < count:
        raise RuntimeError(f"only {len(holding)} of {count} streams held a partition in 60 s")
    return max(headers.values()), max(holding.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--rate", type=float, default=200.0, help="events/s for latency")
    parser.add_argument("--seconds", type=float, default=20.0, help="latency run length")
    parser.add_argument("--idle-streams", type=int, default=1000, help="0 to skip")
    parser.add_argument("--max-uncommitted", default="2000,20000",
                        help="max_uncommitted_events of the throughput stream, one run each")
    parser.add_argument("--rounds", type=int, default=3,
                        help="paired runs of the low-level and the subscription stream")
    parser.add_argument("--warm-up", type=int, default=8,
                        help="untimed subscription streams before the throughput rounds, at"
                             " least (more until ZooKeeper's JIT settles, see warm_up)")
    parser.add_argument("--commits", type=int, default=2000,
                        help="commits of the commit-cost measurement (0 to skip)")
    parser.add_argument("--group", type=int, default=64,
                        help="streams of the consumer group opening at once (0 to skip)")
    parser.add_argument("--engines", default="postgres,kafka")
    args = parser.parse_args()

    with running_broker() as (env, port, _):
        settings = Settings.from_env(env)
        other, other_port = start_server(env, 1)  # a second instance, for its commits
        try:
            measure_engines(args, settings, port, other_port)
        finally:
            stop_server(other)
        if not args.idle_streams:
            return
        set_default_storage(settings.database_url, args.engines.split(",")[0])
        idle = idle_streams(env, args.idle_streams, subscription_paths(args.idle_streams))
        print(idle.describe(args.idle_streams, "subscription streams"), flush=True)


def measure_engines(args: argparse.Namespace, settings: Settings, port: int,
                    other_port: int) -> None:
    """Every figure but the idle streams', for each engine."""
    base_url = f"http://127.0.0.1:{port}"
    for engine in args.engines.split(","):
        set_default_storage(settings.database_url, engine)
        if args.commits:  # first: its commits warm ZooKeeper up
            commits_type = create_event_type(base_url)
            prepublish(settings, commits_type, engine, commit_cost_events(args.commits))
        for width in (1, PARTITIONS) if args.commits else ():
            cost = commit_cost(port, base_url, commits_type, args.commits, width,
                               settings.zookeeper)
            zookeeper = ("" if cost.zookeeper_ms is None
                         else f", ZooKeeper's {cost.zookeeper_ms:.2f} ms")
            print(f"{engine:9} {args.commits} commits of {width} partition(s) one after"
                  " another:"
                  f" {cost.per_s:,.0f}/s, p50 {percentile(cost.latencies, 0.5):.1f} ms,"
                  f" p99 {percentile(cost.latencies, 0.99):.1f} ms;"
                  f" workers' CPU {cost.workers_ms:.2f} ms per commit{zookeeper}", flush=True)
        name = create_event_type(base_url)
        prepublish(settings, name, engine, args.events)
        windows = [int(window) for window in args.max_uncommitted.split(",")]
        cycles = warm_up(port, base_url, name, args.events, min(windows), args.warm_up,
                         settings.zookeeper)
        print(f"{engine:9} warm-up: {cycles} subscription streams at max_uncommitted_events"
              f" {min(windows)}", flush=True)
        for window in windows:
            print(f"{engine:9} subscription stream, batch_limit 100, commit per batch,"
                  f" max_uncommitted_events {window}: "
                  + throughput_rounds(port, base_url, name, args.events, window,
                                      args.rounds, settings.zookeeper).describe(),
                  flush=True)
        rate = line_throughput(port, base_url, name, args.events)
        print(f"{engine:9} subscription stream, batch_limit 1, no commit needed"
              f" (max_uncommitted_events {args.events}): {rate:,.0f} events/s", flush=True)
        name = create_event_type(base_url)
        latencies = end_to_end_latency(port, base_url, name, args.rate, args.seconds)
        if not latencies:
            raise RuntimeError("no event arrived")
        print(f"{engine:9} publish -> subscription stream at {args.rate:.0f} events/s,"
              f" batch_limit 1: p50 {percentile(latencies, 0.5):.1f} ms,"
              f" p99 {percentile(latencies, 0.99):.1f} ms"
              f" ({len(latencies)} events)", flush=True)
        if args.commits:
            latencies = commits_from_elsewhere(port, other_port, base_url,
                                               create_event_type(base_url), 300)
            print(f"{engine:9} 300 commits on another instance, each right after a"
                  f" one-event publish: p50 {percentile(latencies, 0.5):.1f} ms,"
                  f" p90 {percentile(latencies, 0.9):.1f} ms,"
                  f" p99 {percentile(latencies, 0.99):.1f} ms", flush=True)
        seconds = rebalance_time(port, base_url, create_event_type(base_url))
        print(f"{engine:9} rebalance: second stream joined, both receive events after"
              f" {seconds * 1000:.0f} ms", flush=True)
        if args.group:
            opened, holding = group_start(port, base_url, args.group)
            print(f"{engine:9} consumer group: {args.group} streams of one subscription"
                  f" opened at once: all headers after {opened:.2f} s, each holding a"
                  f" partition (its first keep-alive, batch_flush_timeout 1 s) after"
                  f" {holding:.2f} s", flush=True)


if __name__ == "__main__":
    main()
