"""Soak: many open streams and steady publishing for minutes, against a real gunicorn.

    python -m tests.benchmarks.bench_soak [--minutes 10] [--streams 1000]
        [--subscription-streams 100] [--busy-streams 20] [--rate 200]
        [--keep-alive 2] [--sample 30] [--workers 2]

Holds ``--streams`` streams open for ``--minutes``: ``--busy-streams`` low-level
streams reading every partition of an event type that is published to at
``--rate`` events/s the whole time; ``--subscription-streams`` subscription
streams (one subscription each) and low-level streams for the rest on a quiet
event type, where they only get a keep-alive every ``--keep-alive`` seconds.
Every ``--sample`` seconds it prints each worker's resident memory (it must stay
flat), the streams still open, the events published and delivered, and how late
the keep-alives of the quiet streams came in that interval (p50/p99/max after the
``--keep-alive`` seconds they are due). Localhost only; it stops by itself.

Each low-level stream slot needs NAKADI_MAX_STREAMS_PER_PARTITION, so the broker
runs with it set to ``--streams``, and with NAKADI_WORKER_CONNECTIONS above it.
Starts its own PostgreSQL, ZooKeeper and Kafka-protocol broker on free ports
unless NAKADI_* addresses are set.
"""

from __future__ import annotations

import argparse
import http.client
import os
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from tests.benchmarks.bench_publish import create_event_type, order_event
from tests.benchmarks.bench_subscription import create_subscription
from tests.benchmarks.harness import percentile, running_broker

BUSY_PARTITIONS = 4


@dataclass
class Stream:
    """One open stream's socket and what it received."""

    sock: socket.socket
    quiet: bool
    last_line: float
    events: int = 0
    answered: bool = False


@dataclass(eq=False)
class Publisher(threading.Thread):
    """Publishes ``rate`` events/s in batches of ten until stopped."""

    port: int
    event_type: str
    rate: float
    published: int = 0
    failed: int = 0
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True)

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        due = time.monotonic()
        while not self.stop_event.is_set():
            due += 10 / self.rate
            body = orjson.dumps([order_event(self.published + n) for n in range(10)])
            try:
                conn.request("POST", f"/event-types/{self.event_type}/events", body,
                             {"Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                if response.status == 200:
                    self.published += 10
                else:
                    self.failed += 10
            except (OSError, http.client.HTTPException):
                self.failed += 10
                conn.close()
            time.sleep(max(0.0, due - time.monotonic()))
        conn.close()


def gunicorn_workers() -> list[int]:
    """The worker pids of the gunicorn this process started."""
    me = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    for pid in me.read_text().split():
        if b"gunicorn" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return [int(child) for child in
                    Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    raise RuntimeError("no gunicorn among this process's children")


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines()
                    if line.startswith("VmRSS:")).split()[1]) / 1024


def open_stream(port: int, target: str, quiet: bool, headers: dict[str, str]) -> Stream:
    sock = socket.create_connection(("127.0.0.1", port))
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: soak\r\n{head}\r\n".encode())
    sock.setblocking(False)
    return Stream(sock, quiet, time.monotonic())


def soak(args: argparse.Namespace) -> None:
    overrides = {"NAKADI_MAX_STREAMS_PER_PARTITION": str(args.streams),
                 "NAKADI_WORKER_CONNECTIONS": str(args.streams + 200),
                 "NAKADI_LOG_LEVEL": "WARNING"}
    with running_broker(args.workers, overrides) as (_, port, _):
        base_url = f"http://127.0.0.1:{port}"
        busy = create_event_type(base_url, partitions=BUSY_PARTITIONS)
        quiet = create_event_type(base_url, partitions=1)
        subscriptions = [create_subscription(base_url, quiet, "end")
                         for _ in range(args.subscription_streams)]
        keep_alive = f"batch_flush_timeout={args.keep_alive}"
        selector = selectors.DefaultSelector()
        streams: list[Stream] = []

        def add(stream: Stream) -> None:
            streams.append(stream)
            selector.register(stream.sock, selectors.EVENT_READ, stream)

        for _ in range(args.busy_streams):
            # No cursors: every partition, from its newest event.
            add(open_stream(port, f"/event-types/{busy}/events?batch_limit=100&{keep_alive}",
                            False, {}))
        for subscription in subscriptions:
            add(open_stream(port, f"/subscriptions/{subscription}/events?{keep_alive}", True, {}))
        for _ in range(args.streams - len(streams)):
            add(open_stream(port, f"/event-types/{quiet}/events?{keep_alive}", True, {}))
        publisher = Publisher(port, busy, args.rate)
        publisher.start()
        workers = gunicorn_workers()
        print(f"{len(streams)} streams: {args.busy_streams} on {busy} (published at"
              f" {args.rate:.0f} events/s), {args.subscription_streams} subscription and"
              f" {len(streams) - args.busy_streams - args.subscription_streams} low-level"
              f" streams on {quiet} (keep-alives every {args.keep_alive} s);"
              f" workers {workers}", flush=True)
        print("   time  " + "  ".join(f"RSS {pid:>7} MB" for pid in workers)
              + "   open  published  delivered  keep-alive late p50/p99/max ms", flush=True)
        started = time.monotonic()
        end = started + args.minutes * 60
        next_sample = started + min(args.sample, 10)  # the first once the streams settle
        lateness: list[float] = []
        all_lateness: list[float] = []
        samples: list[tuple[float, list[float]]] = []
        ended = 0
        refused: list[str] = []
        while (now := time.monotonic()) < end:
            for key, _ in selector.select(timeout=0.5):
                stream: Stream = key.data
                try:
                    data = stream.sock.recv(1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                now = time.monotonic()
                if not stream.answered and data.startswith(b"HTTP/"):
                    stream.answered = True
                    if not data.startswith(b"HTTP/1.1 200 "):
                        refused.append(data.partition(b"\r\n")[0].decode()
                                       + " " + data.rpartition(b"\r\n\r\n")[2][:200].decode())
                        data = b""
                if not data:
                    ended += 1
                    selector.unregister(stream.sock)
                    stream.sock.close()
                    continue
                if stream.quiet and b"cursor" in data and now - started > args.keep_alive + 2:
                    lateness.append(max(0.0, now - stream.last_line - args.keep_alive))
                stream.events += data.count(b'"eid"')
                stream.last_line = now
            if now >= next_sample:
                rss = [rss_mb(pid) for pid in workers]
                samples.append((now - started, rss))
                all_lateness += lateness
                print(f"{now - started:6.0f} s  " + "  ".join(f"{mb:14.1f}" for mb in rss)
                      + f"  {len(streams) - ended:5}  {publisher.published:9,}"
                      f"  {sum(s.events for s in streams):9,}"
                      f"   {percentile(lateness, 0.5) * 1000:5.0f} /"
                      f" {percentile(lateness, 0.99) * 1000:5.0f} /"
                      f" {max(lateness, default=0) * 1000:5.0f}", flush=True)
                lateness = []
                next_sample = now + args.sample
        publisher.stop_event.set()
        publisher.join(30)
        rss = [rss_mb(pid) for pid in workers]
        for stream in streams:
            stream.sock.close()
        # The first sample comes before the streams' buffers and caches warmed up.
        since, baseline = samples[1] if len(samples) > 1 else (0.0, rss)
        growth = ", ".join(f"{pid}: {before:.1f} -> {after:.1f} MB ({after - before:+.1f})"
                           for pid, before, after in zip(workers, baseline, rss, strict=True))
        print(f"memory per worker from {since:.0f} s to the end: {growth}", flush=True)
        print(f"keep-alives ({len(all_lateness):,}) late by p50"
              f" {percentile(all_lateness, 0.5) * 1000:.0f} ms, p99"
              f" {percentile(all_lateness, 0.99) * 1000:.0f} ms, max"
              f" {max(all_lateness, default=0) * 1000:.0f} ms; {ended} streams ended early;"
              f" {publisher.published:,} events published ({publisher.failed:,} failed),"
              f" {sum(s.events for s in streams):,} delivered; workers now"
              f" {gunicorn_workers()} (were {workers})", flush=True)
        for answer in sorted(set(refused)):
            print(f"refused ({refused.count(answer)}): {answer}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--subscription-streams", type=int, default=100)
    parser.add_argument("--busy-streams", type=int, default=20)
    parser.add_argument("--rate", type=float, default=200.0, help="events/s published")
    parser.add_argument("--keep-alive", type=int, default=2, help="batch_flush_timeout, s")
    parser.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--workers", type=int, default=2)
    soak(parser.parse_args())


if __name__ == "__main__":
    main()
