"""Reads over HTTP against a real gunicorn: what the lookups clients repeat cost.

    python -m tests.benchmarks.bench_reads [--seconds 5] [--rounds 2] [--partitions 8]
                                           [--engine postgres]

Saturates, one after the other, the GETs that consumers and dashboards send again
and again and that each read PostgreSQL (or ZooKeeper) on every request: a
subscription, its cursors, its stats, an event type's partitions and the
subscriptions of an owning application. For each it prints requests/s and
latency p50/p99 from ``wrk`` (16 keep-alive connections, 2 gevent workers), the
CPU the gunicorn workers spent per request (``cpu ms``, from /proc, hardly moved
by other load on the machine), and the p50 of requests sent one after another
(``alone``, one connection for 2 s). The subscription has one event type of
``--partitions`` partitions, read from begin by a stream that committed once,
so its cursors and stats are set. ``--rounds`` runs the whole list again.
Starts its own services (see harness.py); needs ``wrk``.
"""

from __future__ import annotations

import argparse
import subprocess

import requests

from app.config import Settings
from tests.benchmarks.bench_publish import (
    create_event_type,
    order_event,
    parse_wrk,
    workers_cpu_s,
)
from tests.benchmarks.bench_subscription import SubscriptionClient, create_subscription
from tests.benchmarks.harness import running_broker, set_default_storage


def measure(url: str, port: int, connections: int, seconds: float
            ) -> tuple[float, float, float, float]:
    """Requests/s, p50 and p99 in ms, and the workers' CPU ms per request."""
    before = workers_cpu_s(port)
    output = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:.0f}s", "--latency", url],
        check=True, capture_output=True, text=True).stdout
    cpu_s = workers_cpu_s(port) - before
    rate, p50, p99 = parse_wrk(output)
    return rate, p50, p99, cpu_s * 1000 / (rate * seconds)


def prepared(base_url: str, port: int, partitions: int) -> dict[str, str]:
    """The paths to read, by name, of a subscription with committed cursors."""
    name = create_event_type(base_url, partitions)
    response = requests.post(f"{base_url}/event-types/{name}/events",
                             json=[order_event(1)])
    response.raise_for_status()
    subscription = create_subscription(base_url, name)
    client = SubscriptionClient(port, subscription, batch_limit=1)
    for batch in client.batches():
        if batch.get("events"):
            client.commit([batch["cursor"]])
            break
    client.close()
    return {"subscription": f"/subscriptions/{subscription}",
            "subscription cursors": f"/subscriptions/{subscription}/cursors",
            "subscription stats": f"/subscriptions/{subscription}/stats",
            "event type partitions": f"/event-types/{name}/partitions",
            "subscriptions of an application": "/subscriptions?owning_application=bench"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=8, help="of the event type")
    parser.add_argument("--engine", default="postgres", choices=["postgres", "kafka"])
    args = parser.parse_args()
    with running_broker() as (env, port, _):
        set_default_storage(Settings.from_env(env).database_url, args.engine)
        base_url = f"http://127.0.0.1:{port}"
        paths = prepared(base_url, port, args.partitions)
        print(f"{args.engine} engine, {args.partitions} partitions; gunicorn: 2 gevent "
              f"workers; wrk: 16 connections, {args.seconds:.0f} s per run")
        print(f"{'GET':34s} {'req/s':>8s} {'p50 ms':>7s} {'p99 ms':>7s} {'cpu ms':>7s}"
              f" | {'alone p50 ms':>12s}")
        for round_ in range(1, args.rounds + 1):
            print(f"round {round_}", flush=True)
            for label, path in paths.items():
                rate, p50, p99, cpu_ms = measure(base_url + path, port, 16, args.seconds)
                alone = measure(base_url + path, port, 1, 2)[1]
                print(f"  {label:32s} {rate:>8,.0f} {p50:>7.1f} {p99:>7.1f} {cpu_ms:>7.2f}"
                      f" | {alone:>12.1f}", flush=True)


if __name__ == "__main__":
    main()
