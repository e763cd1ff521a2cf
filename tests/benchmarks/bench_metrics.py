"""What counting costs, in-process and free of the machine's noise: the CPU time
the request paths spend on /metrics' figures, and what a scrape costs.

    python -m tests.benchmarks.bench_metrics [--calls 50000] [--event-types 200]

It runs prometheus_client in multiprocess mode (as under gunicorn) in a scratch
folder and prints microseconds per publish request (the context manager around
the handler, KPIs off), per stream batch (``StreamMeter.batch``), and per scrape
of both formats with ``--event-types`` event types published to by two processes.
Compare the publish figure with a publish request's CPU time (``bench_publish``:
2 cores / saturated req/s) to see the share metrics take.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

# Set before prometheus_client is imported; the --fill processes inherit the folder.
if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:  # not setdefault: each --fill made a folder
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="nakadi-bench-metrics-")

from app.monitoring import recording
from app.monitoring.exposition import collect, dropwizard, prometheus_text
from app.monitoring.kpi import Client

CLIENT = Client("bench", "0" * 64, "services")


class KpisOff:
    """The KPI side as it is with the kpi_collection toggle off."""

    def enabled(self) -> bool:
        return False

    def client(self, subject: object) -> Client:
        return CLIENT

    def batch_published(self, *args: object) -> None:
        pass

    def data_streamed(self, *args: object) -> None:
        pass


def per_call_us(calls: int, action) -> float:
    started = time.process_time()
    for _ in range(calls):
        action()
    return (time.process_time() - started) / calls * 1e6


def publish_request(kpis: KpisOff, events: int) -> None:
    with recording.publishing("bench.order-created", kpis, None) as report:  # type: ignore[arg-type]
        report.body_bytes = events * 220
        report.stored = events
        report.status = 200


def fill(event_types: int) -> None:
    """Another process publishing to every event type, as a second worker would."""
    kpis = KpisOff()
    for n in range(event_types):
        with recording.publishing(f"bench.type-{n}", kpis, None) as report:  # type: ignore[arg-type]
            report.body_bytes, report.stored, report.status = 2200, 10, 200
        meter = recording.StreamMeter(kpis, CLIENT, event_type=f"bench.type-{n}")  # type: ignore[arg-type]
        meter.batch(f"bench.type-{n}", 10, 2300)
        meter.close()
    recording.write_counts()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50_000)
    parser.add_argument("--event-types", type=int, default=200)
    parser.add_argument("--fill", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        fill(args.fill)
        return
    try:
        measure(args)
    finally:
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


def measure(args: argparse.Namespace) -> None:
    kpis = KpisOff()
    one = per_call_us(args.calls, lambda: publish_request(kpis, 1))
    hundred = per_call_us(args.calls, lambda: publish_request(kpis, 100))
    meter = recording.StreamMeter(kpis, CLIENT, event_type="bench.order-created")  # type: ignore[arg-type]
    batch = per_call_us(args.calls, lambda: meter.batch("bench.order-created", 100, 22_000))
    meter.close()
    recording.configure(False)
    off = per_call_us(args.calls, lambda: publish_request(kpis, 1))
    recording.configure(True)
    for _ in range(2):  # two more "workers", each with its own files
        subprocess.run([sys.executable, "-m", "tests.benchmarks.bench_metrics",
                        "--fill", str(args.event_types)], check=True)
    scrapes = 20
    started = time.perf_counter()
    for _ in range(scrapes):
        families = collect()
    read_ms = (time.perf_counter() - started) / scrapes * 1000
    started = time.perf_counter()
    for _ in range(scrapes):
        document = dropwizard(collect())
    json_ms = (time.perf_counter() - started) / scrapes * 1000
    started = time.perf_counter()
    for _ in range(scrapes):
        text = prometheus_text(collect())
    text_ms = (time.perf_counter() - started) / scrapes * 1000
    figures = sum(len(section) for key, section in document.items() if key != "version")
    print(f"per publish request, 1 event:    {one:6.1f} us CPU (metrics off: {off:.1f} us)")
    print(f"per publish request, 100 events: {hundred:6.1f} us CPU")
    print(f"per stream batch:                {batch:6.1f} us CPU")
    print(f"scrape, {args.event_types} event types x 2 processes ({len(families)} families):"
          f" /metrics {json_ms:.1f} ms ({figures} figures),"
          f" /metrics/prometheus {text_ms:.1f} ms ({len(text) // 1024} KiB);"
          f" of which reading the files {read_ms:.1f} ms")


if __name__ == "__main__":
    main()
