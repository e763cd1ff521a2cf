"""The broker's figures next to their ceilings, measured in the same run on the same
machine, each broker figure printed as a share of its ceiling.

    python -m tests.benchmarks.bench_all [--quick] [--rounds 2] [--seconds 5]
        [--engines postgres,kafka] [--events 1000000]

Ceilings: a no-op application under the broker's gunicorn/gevent settings
(``noop_app``: POST of the same bodies, a stream of pre-built batches);
PostgreSQL inserting the same rows with a durable commit per transaction, and
confluent-kafka producing with the broker's settings, waiting for every batch,
and consuming (``ceilings``). Broker figures come from the other benchmarks'
measuring functions: publishing at batch 1, 10, 100 and 1000 (``wrk``, 16
connections), p99 at half the saturated rate of single-event requests (and how
busy the machine was meanwhile), one low-level stream from ``begin``, a
subscription stream committing every batch for each ``--max-uncommitted``
window (``--pairs`` runs, each next to a run of the low-level stream with the
same batch_limit: the median pair's share), publish-to-stream latency at a
fixed rate, and idle streams on one worker (``--idle-streams``).

Each round measures everything once, ceilings right before the figures they
bound; the summary shows every round, so the spread is visible. Machines here
vary up to 2x between runs and other work competes for the 2 cores: read the
shares, not the absolute figures. ``--quick``: one round, 3 s per measurement,
200k events, 500 idle streams (about three minutes). Needs ``wrk``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.config import Settings
from app.repository.database import ConnectionPool, make_green
from app.repository.event_types import event_type_with_timelines
from tests.benchmarks import bench_stream, bench_subscription, ceilings
from tests.benchmarks.bench_publish import create_event_type, order_event, paced, saturate
from tests.benchmarks.harness import (
    busy_share,
    machine_cpu_ticks,
    percentile,
    running_broker,
    set_default_storage,
    start_server,
)

NOOP = ("python:tests.benchmarks.noop_app", "tests.benchmarks.noop_app:app")
LATENCY_TARGET_MS = 25.0
IDLE_STREAM_KB = 50


@dataclass
class Figure:
    """One line of the table, with what each round measured."""

    label: str
    target: str
    broker: list[str] = field(default_factory=list)
    ceiling: list[str] = field(default_factory=list)
    share: list[str] = field(default_factory=list)


@dataclass
class Run:
    args: argparse.Namespace
    env: dict[str, str]
    port: int
    noop_port: int
    work_dir: Path
    streams: dict[str, str] = field(default_factory=dict)  # engine -> pre-published type
    publish_to: dict[str, str] = field(default_factory=dict)  # engine -> event type
    kafka_topic: str = ""
    figures: dict[str, Figure] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def record(self, label: str, target: str, broker: str, ceiling: str, share: str) -> None:
        figure = self.figures.setdefault(label, Figure(label, target))
        figure.broker.append(broker)
        figure.ceiling.append(ceiling)
        figure.share.append(share)
        print(f"  {label:38} {broker:>22} | {ceiling:>44} | {share:>5} (target {target})",
              flush=True)


def events_per_s(rate: float) -> str:
    return f"{rate:,.0f} ev/s"


def interleaved(measures: dict[str, Callable[[float], tuple[float, ...]]], seconds: float,
                slice_s: float) -> dict[str, tuple[float, ...]]:
    """Run each measure for ``slice_s`` in turn until each had ``seconds``, so that a
    figure and its ceilings see the same machine; per measure, the mean of the first
    value (a rate) and the median of the others (latencies)."""
    slices: dict[str, list[tuple[float, ...]]] = {name: [] for name in measures}
    for _ in range(max(1, round(seconds / slice_s))):
        for name, measure in measures.items():
            slices[name].append(measure(slice_s))
    summary = {}
    for name, results in slices.items():
        rates, *latencies = zip(*results, strict=True)
        summary[name] = (statistics.mean(rates), *map(statistics.median, latencies))
    return summary


def publish_figures(run: Run, batch: int) -> None:
    """Saturated publishing of ``batch``-event requests on every engine, next to the no-op
    POST of the same body and the storage's own rate at that batch size."""
    connections = run.args.connections
    body = json.dumps([order_event(n) for n in range(batch)]).encode()
    body_path = run.work_dir / f"body-{batch}.json"
    body_path.write_bytes(body)

    def posting(url: str) -> Callable[[float], tuple[float, ...]]:
        return lambda seconds: saturate(url, body_path, connections, seconds)

    measures = {"no-op": posting(f"http://127.0.0.1:{run.noop_port}/event-types/noop/events")}
    storages: dict[str, ceilings.PostgresInserts | ceilings.KafkaProduce] = {}
    for engine, name in run.publish_to.items():
        storages[engine] = (
            ceilings.PostgresInserts(run.env["NAKADI_DATABASE_URL"], batch, connections)
            if engine == "postgres" else
            ceilings.KafkaProduce(run.env["NAKADI_KAFKA_BOOTSTRAP_SERVERS"], run.kafka_topic,
                                  batch, connections))
        measures[f"{engine} storage"] = lambda s, storage=storages[engine]: (storage.rate(s),)
        measures[engine] = posting(f"{run.base_url}/event-types/{name}/events")
    # Slices of 1 s while requests take milliseconds; one run when they take longer.
    slice_s = max(1.0, run.args.seconds / 5) if batch <= 100 else run.args.seconds
    try:
        results = interleaved(measures, run.args.seconds, slice_s)
    finally:
        for storage in storages.values():
            storage.close()
    noop_rate = results["no-op"][0]
    for engine, name in run.publish_to.items():
        rate, p50 = results[engine][:2]
        storage = results[f"{engine} storage"][0]
        ceiling = min(noop_rate * batch, storage)
        run.record(f"{engine} publish, batch {batch}",
                   "60%" if engine == "postgres" else "80%",
                   f"{events_per_s(rate * batch)} p50 {p50:.0f}ms",
                   f"no-op POST {events_per_s(noop_rate * batch)}, "
                   f"{'PostgreSQL' if engine == 'postgres' else 'raw produce'} "
                   f"{events_per_s(storage)}", f"{rate * batch / ceiling:.0%}")
        if batch == 1:
            half_load_latency(run, engine, name, body, rate / 2)


def half_load_latency(run: Run, engine: str, name: str, body: bytes, rate: float) -> None:
    """p99 of single-event requests sent at fixed times at half the saturated rate, next to
    the no-op POST at the same rate, each with how busy the machine was meanwhile: on
    these virtual machines a request costs more CPU the fewer arrive together, so half
    the saturated rate takes well over half the machine."""
    before = machine_cpu_ticks()
    _, p99, failed = paced(run.port, f"/event-types/{name}/events", body, rate,
                           run.args.seconds)
    after = machine_cpu_ticks()
    busy = busy_share(before, after)
    _, noop_p99, _ = paced(run.noop_port, "/event-types/noop/events", body, rate,
                           run.args.seconds)
    noop_busy = busy_share(after, machine_cpu_ticks())
    failures = f" ({failed} failed)" if failed else ""
    run.record(f"{engine} publish p99 at half load", f"<{LATENCY_TARGET_MS:.0f}ms",
               f"{p99:.1f}ms at {rate:,.0f} req/s, machine {busy:.0%} busy{failures}",
               f"no-op POST {noop_p99:.1f}ms, machine {noop_busy:.0%} busy", "")


def stream_figures(run: Run) -> None:
    """One low-level stream from begin (batch_limit 1000) next to the no-op stream, and for
    Kafka raw consuming; a subscription stream next to the low-level one; latency."""
    count = run.args.events
    noop = bench_stream.stream_throughput(run.noop_port, "noop", count)[0]
    for engine, name in run.streams.items():
        ceiling, label = noop, f"no-op stream {events_per_s(noop)}"
        if engine == "kafka":
            consume = ceilings.kafka_consume_per_second(
                run.env["NAKADI_KAFKA_BOOTSTRAP_SERVERS"], topic_of(run, name), count)
            ceiling = min(noop, consume)
            label += f", raw consume {events_per_s(consume)}"
        rate = bench_stream.stream_throughput(run.port, name, count)[0]
        run.record(f"{engine} low-level stream", "50%", events_per_s(rate), label,
                   f"{rate / ceiling:.0%}")

        sub_count = min(count, run.args.subscription_events)
        windows = [int(window) for window in run.args.max_uncommitted.split(",")]
        cycles = bench_subscription.warm_up(run.port, run.base_url, name, sub_count,
                                            min(windows), run.args.warm_up,
                                            run.env["NAKADI_ZOOKEEPER"])
        print(f"  {engine} warm-up: {cycles} subscription streams at max_uncommitted_events"
              f" {min(windows)}", flush=True)
        for window in windows:
            paired = bench_subscription.throughput_rounds(
                run.port, run.base_url, name, sub_count, window, run.args.pairs,
                run.env["NAKADI_ZOOKEEPER"])
            run.record(f"{engine} subscription stream, max_uncommitted_events {window}", "70%",
                       f"{events_per_s(paired.rate)} commit p99 "
                       f"{percentile(paired.commits, 0.99):.0f}ms",
                       f"low-level stream batch 100 {events_per_s(paired.reference)}",
                       f"{paired.share:.0%}")

        fresh = create_event_type(run.base_url) if engine == "postgres" else kafka_type(run)
        latencies = bench_stream.end_to_end_latency(run.port, fresh, run.args.rate,
                                                    run.args.latency_seconds)
        if not latencies:
            raise RuntimeError("no event arrived")
        run.record(f"{engine} publish -> stream p99", f"<{LATENCY_TARGET_MS:.0f}ms",
                   f"{latencies[int(len(latencies) * .99)]:.1f}ms at {run.args.rate:.0f} ev/s",
                   "", "")
        idle_figure(run, engine)


def idle_figure(run: Run, engine: str) -> None:
    """Idle low-level streams on a one-worker server: memory each, keep-alives' lateness."""
    count = run.args.idle_streams
    if not count:
        return
    idle = bench_stream.idle_low_level_streams(run.env, engine, count)
    run.record(f"{engine} idle streams on one worker", f"<{IDLE_STREAM_KB} KB each, on time",
               f"{count}: {idle.kb_each:.0f} KB each, keep-alives late p99 "
               f"{idle.late_p99_s * 1000:.0f}ms, max {idle.late_max_s * 1000:.0f}ms", "", "")


def kafka_type(run: Run) -> str:
    set_default_storage(run.env["NAKADI_DATABASE_URL"], "kafka")
    try:
        return create_event_type(run.base_url)
    finally:
        set_default_storage(run.env["NAKADI_DATABASE_URL"], "postgres")


def topic_of(run: Run, name: str) -> str:
    make_green()
    pool = ConnectionPool(run.env["NAKADI_DATABASE_URL"], 1)
    try:
        found = event_type_with_timelines(pool, name)
    finally:
        pool.close()
    assert found is not None, f"{name} was created"
    return found[1].active.topic


def prepare(run: Run) -> None:
    """An event type per engine to publish to, and one with ``--events`` events to stream."""
    settings = Settings.from_env(run.env)
    for engine in run.args.engines.split(","):
        set_default_storage(settings.database_url, engine)
        run.publish_to[engine] = create_event_type(run.base_url)
        run.streams[engine] = create_event_type(run.base_url)
        bench_stream.prepublish(settings, run.streams[engine], engine, run.args.events)
    set_default_storage(settings.database_url, "postgres")
    if "kafka" in run.publish_to:
        run.kafka_topic = ceilings.create_kafka_topic(run.env["NAKADI_KAFKA_BOOTSTRAP_SERVERS"])


def summary(run: Run) -> None:
    rounds = run.args.rounds
    print(f"\n{rounds} round(s); {run.args.workers} gunicorn workers, {run.args.connections} "
          f"wrk connections, {run.args.seconds:.0f} s per measurement, "
          f"as many storage clients; values of each round separated by '/'\n")
    print("| figure | broker | ceiling in the same run | share | target |")
    print("|---|---|---|---|---|")
    for figure in run.figures.values():
        def cells(values: list[str]) -> str:
            return " / ".join(values) if any(values) else ""
        print(f"| {figure.label} | {cells(figure.broker)} | {cells(figure.ceiling)} "
              f"| {cells(figure.share)} | {figure.target} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="one round, 3 s per measurement, 200k events")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    parser.add_argument("--engines", default="postgres,kafka")
    parser.add_argument("--batches", default="1,10,100,1000")
    parser.add_argument("--events", type=int, default=1_000_000, help="streamed from begin")
    parser.add_argument("--subscription-events", type=int, default=300_000)
    parser.add_argument("--max-uncommitted", default="2000,20000",
                        help="max_uncommitted_events of the subscription stream, one run each")
    parser.add_argument("--pairs", type=int, default=3,
                        help="paired runs of the low-level and the subscription stream per"
                             " window and round: the share is the median pair's (the"
                             " reference alone moved 2x between rounds)")
    parser.add_argument("--warm-up", type=int, default=8,
                        help="untimed subscription streams before the subscription figures,"
                             " each round, at least: more until ZooKeeper's JIT settles"
                             " (bench_subscription.warm_up)")
    parser.add_argument("--rate", type=float, default=200.0, help="events/s for latency")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--idle-streams", type=int, default=2000,
                        help="idle low-level streams on one worker, 0 to skip")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.events = 1, 3.0, 200_000
        args.subscription_events, args.latency_seconds = 100_000, 5.0
        args.idle_streams = 500
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install wrk")

    with running_broker(args.workers) as (env, port, work_dir):
        noop, noop_port = start_server(env, args.workers, *NOOP)
        try:
            run = Run(args, env, port, noop_port, work_dir)
            prepare(run)
            steps: list[Callable[[], None]] = [
                *(lambda b=int(b): publish_figures(run, b) for b in args.batches.split(",")),
                lambda: stream_figures(run)]
            for number in range(1, args.rounds + 1):
                print(f"round {number}", flush=True)
                for step in steps:
                    step()
            summary(run)
        finally:
            noop.terminate()
            noop.wait(30)


if __name__ == "__main__":
    main()
