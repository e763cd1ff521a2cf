"""Every figure the broker keeps, defined once: a prometheus_client metric plus the
Dropwizard name and kind it has in ``/metrics`` (named like Nakadi's, so existing
ZMON checks keep working).

Under gunicorn, prometheus_client runs in multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR``, set by ``gunicorn.conf.py``): each worker writes its
values to its own memory-mapped file and a scrape sums the files, so both formats
count every worker. Labels stay bounded: event-type names, subscription ids,
client applications and status codes, never stream ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeVar

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.metrics import MetricWrapperBase

disable_created_metrics()  # the _created samples would double what a scrape carries

Kind = Literal["gauge", "counter", "meter", "histogram", "timer"]

SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
EVENTS_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)


@dataclass(frozen=True)
class Figure:
    """A metric and how ``/metrics`` (Dropwizard JSON) shows it. ``name`` is a template
    over the metric's labels; dots in label values become ``#`` as in Nakadi."""

    metric: MetricWrapperBase
    kind: Kind
    name: str
    scale: float = 1.0  # timers: seconds to milliseconds


FIGURES: dict[str, Figure] = {}


M = TypeVar("M", bound=MetricWrapperBase)


def _figure(metric: M, kind: Kind, name: str, scale: float = 1.0) -> M:
    FIGURES[metric._name] = Figure(metric, kind, name, scale)
    return metric


# Publishing, per event type.
PUBLISHED_EVENTS = _figure(Counter(
    "nakadi_published_events", "Events stored by publishing", ["event_type"]),
    "meter", "nakadi.eventtypes.{event_type}.publishing.events")
PUBLISHED_BYTES = _figure(Counter(
    "nakadi_published_bytes", "Bytes of the batches whose events were stored",
    ["event_type"]),
    "meter", "nakadi.eventtypes.{event_type}.publishing.trafficInBytes")
PUBLISHING_SECONDS = _figure(Histogram(
    "nakadi_publishing_seconds", "Time to answer a publish request", ["event_type"],
    buckets=SECONDS_BUCKETS),
    "timer", "nakadi.eventtypes.{event_type}.publishing", scale=1000.0)
EVENTS_PER_BATCH = _figure(Histogram(
    "nakadi_publishing_batch_events", "Events per published batch", ["event_type"],
    buckets=EVENTS_BUCKETS),
    "histogram", "nakadi.eventtypes.{event_type}.publishing.eventsPerBatch")
PUBLISHING_RESPONSES = _figure(Counter(
    "nakadi_publishing_responses", "Publish requests answered, by status",
    ["event_type", "status"]),
    "meter", "nakadi.eventtypes.{event_type}.publishing.{status}")

# Low-level streams ("lola"), per event type and consuming application.
STREAMED_EVENTS = _figure(Counter(
    "nakadi_streamed_events", "Events sent by low-level streams", ["event_type"]),
    "meter", "nakadi.eventtypes.{event_type}.streaming.events")
STREAMED_BYTES = _figure(Counter(
    "nakadi_streamed_bytes", "Bytes sent by low-level streams", ["client", "event_type"]),
    "meter", "lola.{client}.{event_type}.bytes-flushed")
OPEN_STREAMS = _figure(Gauge(
    "nakadi_open_streams", "Open low-level streams", ["event_type"],
    multiprocess_mode="livesum"),
    "counter", "nakadi.eventtypes.{event_type}.consumers")

# Subscription streams ("hila"), per subscription.
SUBSCRIPTION_EVENTS = _figure(Counter(
    "nakadi_subscription_streamed_events", "Events sent by subscription streams",
    ["subscription"]),
    "meter", "nakadi.subscriptions.{subscription}.streaming.events")
SUBSCRIPTION_BYTES = _figure(Counter(
    "nakadi_subscription_streamed_bytes", "Bytes sent by subscription streams",
    ["client", "subscription"]),
    "meter", "hila.{client}.{subscription}.bytes-flushed")
OPEN_SUBSCRIPTION_STREAMS = _figure(Gauge(
    "nakadi_subscription_open_streams", "Open subscription streams", ["subscription"],
    multiprocess_mode="livesum"),
    "counter", "nakadi.subscriptions.{subscription}.consumers")
COMMITTED_CURSORS = _figure(Counter(
    "nakadi_subscription_committed_cursors", "Cursors committed (moved forward)",
    ["subscription"]),
    "meter", "nakadi.subscriptions.{subscription}.commits")
SUBSCRIPTION_LAG = _figure(Gauge(
    "nakadi_subscription_lag_events",
    "Unconsumed events of subscriptions streamed through this instance",
    ["subscription"], multiprocess_mode="livemax"),
    "gauge", "nakadi.subscriptions.{subscription}.lag")

# KPI events (app/monitoring/kpi.py).
KPI_EVENTS = _figure(Counter(
    "nakadi_kpi_events", "KPI events, by outcome (published, dropped, failed)",
    ["outcome"]),
    "meter", "nakadi.kpi.events.{outcome}")

# The process (each worker; set by app/monitoring/ticker.py).
WORKERS = _figure(Gauge(
    "nakadi_process_workers", "Live worker processes", multiprocess_mode="livesum"),
    "gauge", "process.workers")
MEMORY = _figure(Gauge(
    "nakadi_process_resident_memory_bytes", "Resident memory of the workers",
    multiprocess_mode="livesum"),
    "gauge", "process.memory.rss")
THREADS = _figure(Gauge(
    "nakadi_process_threads", "OS threads of the workers", multiprocess_mode="livesum"),
    "gauge", "process.threads")
OPEN_FDS = _figure(Gauge(
    "nakadi_process_open_fds", "Open file descriptors of the workers",
    multiprocess_mode="livesum"),
    "gauge", "process.fds.open")
MAX_FDS = _figure(Gauge(
    "nakadi_process_max_fds", "File descriptor limit of a worker",
    multiprocess_mode="livemax"),
    "gauge", "process.fds.max")
CPU_SECONDS = _figure(Gauge(
    "nakadi_process_cpu_seconds", "CPU time used by the live workers",
    multiprocess_mode="livesum"),
    "gauge", "process.cpu.seconds")
START_TIME = _figure(Gauge(
    "nakadi_process_start_time_seconds", "When the instance (gunicorn's master) started",
    multiprocess_mode="min"),
    "gauge", "process.start_time")
ACTIVE_REQUESTS = _figure(Gauge(
    "nakadi_process_active_requests",
    "Requests being served, open streams included (the greenlets that serve them)",
    multiprocess_mode="livesum"),
    "gauge", "process.requests.active")
GC_COLLECTIONS = _figure(Gauge(
    "nakadi_python_gc_collections", "Garbage collections of the live workers",
    ["generation"], multiprocess_mode="livesum"),
    "gauge", "python.gc.gen{generation}.collections")

# The one-minute rates of meters and timers (Dropwizard's m1_rate), computed by each
# worker for its own counts and summed; Prometheus computes rates itself, so
# /metrics/prometheus leaves these out.
RATE_SUFFIX = "_m1_rate"
M1_RATES: dict[str, Gauge] = {
    name: Gauge(name + RATE_SUFFIX, f"One-minute rate of {name}",
                list(figure.metric._labelnames), multiprocess_mode="livesum")
    for name, figure in FIGURES.items() if figure.kind in ("meter", "timer")
}

# Aliases of Nakadi's JVM gauges, for ZMON checks written against it.
ALIASES = {"process.memory.rss": "jvm.memory.total.used", "process.threads": "jvm.threads.count"}
