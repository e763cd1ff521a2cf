"""The pieces of app/monitoring that need no server: quantiles from histogram
buckets, the Dropwizard document, one-minute rates, the bounded KPI queue."""

from __future__ import annotations

import math
import time
import types

import pytest
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily

from app.config import Settings
from app.monitoring import figures, kpi, recording, ticker
from app.monitoring.exposition import _quantile, dropwizard, prometheus_text
from tests.helpers.clock import Clock
from tests.helpers.waiting import wait_until


def test_quantiles_interpolate_within_their_bucket():
    # 10 observations: 4 up to 1 ms, 4 more up to 5 ms, 2 beyond 10 ms
    buckets = [(0.001, 4.0), (0.005, 8.0), (0.01, 8.0), (math.inf, 10.0)]
    assert _quantile(buckets, 10, 0.2) == pytest.approx(0.0005)
    assert _quantile(buckets, 10, 0.6) == pytest.approx(0.003)
    assert _quantile(buckets, 10, 0.99) == 0.01  # beyond the largest bound
    assert _quantile([], 0, 0.5) == 0.0


def test_the_document_names_figures_like_nakadi():
    events = CounterMetricFamily("nakadi_published_events", "", labels=["event_type"])
    events.add_metric(["order.created"], 42)
    seconds = HistogramMetricFamily("nakadi_publishing_seconds", "", labels=["event_type"])
    seconds.add_metric(["order.created"], [("0.001", 1), ("0.01", 3), ("+Inf", 4)],
                       sum_value=0.1)
    document = dropwizard([events, seconds])
    assert document["meters"]["nakadi.eventtypes.order#created.publishing.events"] == {
        "count": 42, "m1_rate": 0.0, "units": "events/second"}
    timer = document["timers"]["nakadi.eventtypes.order#created.publishing"]
    assert timer["count"] == 4 and timer["mean"] == pytest.approx(25.0)  # milliseconds
    assert timer["duration_units"] == "milliseconds" and timer["p50"] <= timer["p99"]
    text = prometheus_text([events, seconds]).decode()
    assert 'nakadi_published_events_total{event_type="order.created"} 42.0' in text


def test_one_minute_rates_move_towards_the_current_rate():
    name = f"unit.rate-{time.monotonic_ns()}"
    rates = ticker.RateTracker()
    figures.PUBLISHED_EVENTS.labels(name).inc(50)
    rates.tick()
    gauge = figures.M1_RATES["nakadi_published_events"].labels(name)
    assert gauge._value.get() == 10.0  # 50 events in the first 5 s tick
    rates.tick()  # nothing more: the average decays, as Dropwizard's does
    assert 0 < gauge._value.get() < 10.0


def test_kpi_events_past_the_queue_capacity_are_dropped_and_counted(monkeypatch):
    services = types.SimpleNamespace(settings=Settings())
    publisher = kpi.KpiPublisher(services)  # type: ignore[arg-type]
    monkeypatch.setattr(publisher, "enabled", lambda: True)
    monkeypatch.setattr(kpi, "QUEUE_CAPACITY", 100)
    dropped = figures.KPI_EVENTS.labels("dropped")
    before = dropped._value.get()
    client = publisher.client(None)
    started = time.perf_counter()
    for _ in range(105):  # nothing yields meanwhile, so the queue is not drained
        publisher.batch_published("x", client, 1, 10, 0.001)
    assert time.perf_counter() - started < 0.1
    assert publisher.pending() == 100
    assert dropped._value.get() - before == 5
    publisher._greenlet.kill()  # its services are not real: it must not publish


def test_a_stream_adds_what_it_sent_to_its_counters_each_second_and_at_its_end():
    name = f"unit.meter-{time.monotonic_ns()}"
    services = types.SimpleNamespace(settings=Settings())
    publisher = kpi.KpiPublisher(services)  # type: ignore[arg-type]
    client = kpi.Client("app", "hashed", "")
    clock = Clock()
    meter = recording.StreamMeter(publisher, client, event_type=name, clock=clock)
    events = figures.STREAMED_EVENTS.labels(name)
    sent = figures.STREAMED_BYTES.labels("app", name)
    meter.batch(name, 1, 100)
    meter.batch(name, 2, 200)
    assert (events._value.get(), sent._value.get()) == (0, 0)
    clock.now += recording.COUNT_INTERVAL_S
    meter.batch(name, 0, 20)  # a keep-alive, once the interval passed
    assert (events._value.get(), sent._value.get()) == (3, 320)
    meter.batch(name, 4, 400)
    meter.close()
    assert (events._value.get(), sent._value.get()) == (7, 720)
    assert figures.OPEN_STREAMS.labels(name)._value.get() == 0


def test_a_publish_request_counts_in_memory_until_the_counts_are_written():
    name = f"unit.publish-{time.monotonic_ns()}"
    services = types.SimpleNamespace(settings=Settings())
    publisher = kpi.KpiPublisher(services)  # type: ignore[arg-type]
    for status, stored, body_bytes in ((200, 3, 700), (422, 0, 90)):
        with recording.publishing(name, publisher, None) as report:
            report.status, report.stored, report.body_bytes = status, stored, body_bytes
    events = figures.PUBLISHED_EVENTS.labels(name)
    answered = figures.PUBLISHING_SECONDS.labels(name)
    assert events._value.get() == 0  # a scrape of this process writes them first
    recording.write_counts()
    assert events._value.get() == 3
    assert figures.PUBLISHED_BYTES.labels(name)._value.get() == 700
    assert figures.PUBLISHING_RESPONSES.labels(name, "200")._value.get() == 1
    assert figures.PUBLISHING_RESPONSES.labels(name, "422")._value.get() == 1
    assert sum(bucket.get() for bucket in answered._buckets) == 2
    assert figures.EVENTS_PER_BATCH.labels(name)._sum.get() == 3
    recording.write_counts()  # nothing new: nothing counted twice
    assert events._value.get() == 3


def test_tallied_observations_fill_the_buckets_histogram_observe_would():
    name = f"unit.tally-{time.monotonic_ns()}"
    tally = recording.Tally()
    values = [0.0, 0.001, 0.0010001, 0.0025, 0.3, 10.0, 99.0, 0.001]  # bounds, and past the last
    for value in values:
        tally.observe(figures.PUBLISHING_SECONDS, (name,), value)
        figures.PUBLISHING_SECONDS.labels(name + "-direct").observe(value)
    tally.write()
    tallied = figures.PUBLISHING_SECONDS.labels(name)
    direct = figures.PUBLISHING_SECONDS.labels(name + "-direct")
    assert [b.get() for b in tallied._buckets] == [b.get() for b in direct._buckets]
    assert tallied._sum.get() == pytest.approx(direct._sum.get())


def test_counts_go_to_the_metrics_on_their_own_within_the_interval():
    name = f"unit.due-{time.monotonic_ns()}"
    tally = recording.Tally(interval_s=0.05)
    tally.count(figures.COMMITTED_CURSORS, (name,), 2)
    tally.count(figures.COMMITTED_CURSORS, (name,), 3)
    committed = figures.COMMITTED_CURSORS.labels(name)
    assert committed._value.get() == 0
    wait_until(lambda: committed._value.get() == 5, timeout=2, what="the counts written")
    tally.count(figures.COMMITTED_CURSORS, (name,))  # a later count starts a new interval
    wait_until(lambda: committed._value.get() == 6, timeout=2, what="the next count written")
