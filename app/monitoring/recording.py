"""What the request paths call to count their work: once per publish request, commit
or stream batch, never per event. They add up in this process's memory, and what they
added goes to the metrics (the worker's memory-mapped file under gunicorn) at most
``COUNT_INTERVAL_S`` later: each increment of a metric locks and writes that file, and
a publish request made seven of them (measured by ``bench_metrics``)."""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gevent
from prometheus_client import Counter, Histogram
from prometheus_client.metrics import MetricWrapperBase
from werkzeug.exceptions import HTTPException

from app.dependencies import unavailable_from
from app.monitoring import figures
from app.monitoring.kpi import Client
from app.problems import Problem
from app.security.subjects import Subject

if TYPE_CHECKING:
    from app.monitoring.kpi import KpiPublisher

log = logging.getLogger(__name__)

KPI_STREAM_INTERVAL_S = 60.0
"""How often a long stream reports what it sent as a ``nakadi.data.streamed`` KPI."""

COUNT_INTERVAL_S = 1.0
"""How long counts wait in memory at most before they go to the metrics. An increment
locks and writes the worker's metrics file, ~1 us on a fast machine and 5-7 us on a
slow one under gevent: per line, two of them cost a stream of 1-event batches as much
as everything else it did per event, and the seven of a publish request took 37-60 us
of CPU on a slow machine, against 9-17 us for adding them up (``bench_metrics``)."""


class _Nothing:
    """Stands for a metric's child while metrics are off: counting costs nothing."""

    def inc(self, amount: float = 1) -> None:
        pass

    def dec(self, amount: float = 1) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass


_NOTHING = _Nothing()
_enabled = True
# Label children, looked up once rather than on every request.
_children: dict[tuple[str, tuple[str, ...]], Any] = {}


def configure(enabled: bool) -> None:
    """``NAKADI_METRICS_ENABLED``: with False, the request paths count nothing (KPI events
    still follow their feature toggle)."""
    global _enabled
    _enabled = enabled
    _children.clear()


def _child(metric: MetricWrapperBase, *labels: str) -> Any:
    key = (metric._name, labels)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*labels) if _enabled else _NOTHING
    return child


Labels = tuple[str, ...]


class Tally:
    """Increments of counters and observations of histograms, added up here and added to
    the metrics together (``write``), at most ``interval_s`` after the first of them."""

    def __init__(self, interval_s: float = COUNT_INTERVAL_S) -> None:
        self._interval_s = interval_s
        self._counts: dict[tuple[Counter, Labels], float] = {}
        # Per histogram child: the sum of its observations, then how many fell in each bucket.
        self._observed: dict[tuple[Histogram, Labels], list[float]] = {}
        self._due: gevent.Greenlet | None = None

    def count(self, metric: Counter, labels: Labels, amount: float = 1) -> None:
        key = (metric, labels)
        self._counts[key] = self._counts.get(key, 0) + amount
        self._write_later()

    def observe(self, metric: Histogram, labels: Labels, value: float) -> None:
        key = (metric, labels)
        sums = self._observed.get(key)
        if sums is None:
            sums = self._observed[key] = [0.0] * (len(metric._upper_bounds) + 1)
        sums[0] += value
        # The first bucket whose bound holds the value, as Histogram.observe picks it.
        sums[1 + bisect_left(metric._upper_bounds, value)] += 1
        self._write_later()

    def write(self) -> None:
        """Add everything counted so far to the metrics."""
        counts, observed = self._counts, self._observed
        self._counts, self._observed = {}, {}
        try:
            for (counter, labels), amount in counts.items():
                counter.labels(*labels).inc(amount)
            for (histogram, labels), sums in observed.items():
                child = histogram.labels(*labels)
                child._sum.inc(sums[0])
                for bucket, count in zip(child._buckets, sums[1:], strict=True):
                    if count:
                        bucket.inc(count)
        except Exception:  # counting must never fail what it counts
            log.exception("writing the counts of the request paths failed")

    def _write_later(self) -> None:
        """Write ``interval_s`` from now, unless a write is due already."""
        if self._due is not None:
            return

        def write_due() -> None:
            self._due = None
            self.write()
        self._due = gevent.spawn_later(self._interval_s, write_due)


_tally = Tally()


def write_counts() -> None:
    """Add what the request paths counted to the metrics now: before this process
    answers a scrape, and as it exits."""
    _tally.write()


@dataclass
class PublishReport:
    """What a publish request did, filled in by its handler."""

    status: int = 500
    stored: int = 0  # events stored
    body_bytes: int = 0


@contextmanager
def publishing(event_type: str, kpis: KpiPublisher, subject: Subject | None
               ) -> Iterator[PublishReport]:
    """Measure a publish request to an existing event type: its time, answer, events
    and bytes stored; an exception sets the status it will be answered with."""
    started = time.perf_counter()
    report = PublishReport()
    try:
        yield report
    except Problem as problem:
        report.status = problem.status
        raise
    except HTTPException as error:
        report.status = error.code or 500
        raise
    except Exception as error:
        report.status = 503 if unavailable_from(error) is not None else 500
        raise
    finally:
        _record_publish(event_type, report, time.perf_counter() - started, kpis, subject)


def _record_publish(event_type: str, report: PublishReport, seconds: float, kpis: KpiPublisher,
                    subject: Subject | None) -> None:
    try:
        if _enabled:
            labels = (event_type,)
            _tally.observe(figures.PUBLISHING_SECONDS, labels, seconds)
            _tally.count(figures.PUBLISHING_RESPONSES, (event_type, str(report.status)))
            if report.stored:
                _tally.count(figures.PUBLISHED_EVENTS, labels, report.stored)
                _tally.count(figures.PUBLISHED_BYTES, labels, report.body_bytes)
                _tally.observe(figures.EVENTS_PER_BATCH, labels, report.stored)
        if report.stored:
            kpis.batch_published(event_type, kpis.client(subject), report.stored,
                                 report.body_bytes, seconds)
    except Exception:  # counting must never fail the request it counts
        log.exception("recording the metrics of a publish to %s failed", event_type)


def committed(subscription: str, cursors: int) -> None:
    """``cursors`` cursors of the subscription moved forward."""
    if cursors and _enabled:
        _tally.count(figures.COMMITTED_CURSORS, (subscription,), cursors)


class StreamMeter:
    """Counts what one stream sends, batch by batch (``batch``), and reports it as
    ``nakadi.data.streamed`` KPIs every ``KPI_STREAM_INTERVAL_S`` and at its end
    (``close``). Open while the stream is: it counts in the open-streams gauge."""

    def __init__(self, kpis: KpiPublisher, client: Client, event_type: str | None = None,
                 subscription: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._kpis = kpis
        self._client = client
        self._subscription = subscription
        self._clock = clock
        self._unreported: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self._report_at = clock() + KPI_STREAM_INTERVAL_S
        self._uncounted_events = self._uncounted_bytes = 0
        self._count_at = clock() + COUNT_INTERVAL_S
        self._closed = False
        if subscription is None:
            assert event_type is not None
            self._open = _child(figures.OPEN_STREAMS, event_type)
            self._events = _child(figures.STREAMED_EVENTS, event_type)
            self._bytes = _child(figures.STREAMED_BYTES, client.app, event_type)
        else:
            self._open = _child(figures.OPEN_SUBSCRIPTION_STREAMS, subscription)
            self._events = _child(figures.SUBSCRIPTION_EVENTS, subscription)
            self._bytes = _child(figures.SUBSCRIPTION_BYTES, client.app, subscription)
        self._open.inc()

    def batch(self, event_type: str, events: int, sent_bytes: int) -> None:
        """A batch line (or keep-alive) of ``sent_bytes`` carrying ``events`` events."""
        self._uncounted_events += events
        self._uncounted_bytes += sent_bytes
        unreported = self._unreported[event_type]
        unreported[0] += events
        unreported[1] += sent_bytes
        now = self._clock()
        if now >= self._count_at:
            self._count(now)
        if now >= self._report_at:
            self._report()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._count(self._clock())
            self._open.dec()
            self._report()

    def _count(self, now: float) -> None:
        self._count_at = now + COUNT_INTERVAL_S
        if self._uncounted_events:
            self._events.inc(self._uncounted_events)
        if self._uncounted_bytes:
            self._bytes.inc(self._uncounted_bytes)
        self._uncounted_events = self._uncounted_bytes = 0

    def _report(self) -> None:
        self._report_at = self._clock() + KPI_STREAM_INTERVAL_S
        for event_type, (events, sent_bytes) in self._unreported.items():
            if events:
                self._kpis.data_streamed(event_type, self._client, events,
                                         sent_bytes, self._subscription)
        self._unreported.clear()
