"""Reading the figures of every worker and writing them out: Prometheus's text
format, and the Dropwizard (codahale metrics-json) document Nakadi serves.

Both read the same values: under gunicorn the memory-mapped files of all the
instance's workers (prometheus_client's multiprocess mode), otherwise this
process's registry.
"""

from __future__ import annotations

import math
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gevent
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

from app.monitoring.figures import ALIASES, FIGURES, RATE_SUFFIX, Figure

VERSION = "4.0.0"  # the metrics-json format version the document follows
PERCENTILES = (("p50", 0.5), ("p75", 0.75), ("p95", 0.95), ("p98", 0.98), ("p99", 0.99),
               ("p999", 0.999))

Labels = tuple[tuple[str, str], ...]


def collect() -> list[Metric]:
    """Every metric family, summed over the instance's workers."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path)
        return list(registry.collect())
    return list(REGISTRY.collect())


def off_the_hub(render: Callable[[], bytes]) -> bytes:
    """Run a scrape in a native thread of gevent's pool: reading every worker's files
    is pure CPU (about 1 ms per event type published to, see ``bench_metrics``), and
    on the hub it would stall this worker's other requests and streams meanwhile.
    Without multiprocess mode it reads this process's registry, whose locks are
    gevent's under gunicorn, so it stays on the hub."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return render()
    result: bytes = gevent.get_hub().threadpool.apply(render)
    return result


class _Families:
    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> list[Metric]:
        return self._families


def prometheus_text(families: Sequence[Metric]) -> bytes:
    """The text format; the one-minute rates kept for the JSON are left out."""
    return generate_latest(_Families(
        f for f in families if not f.name.endswith(RATE_SUFFIX)))


def dropwizard(families: Sequence[Metric], now: float | None = None) -> dict[str, Any]:
    """The document of ``GET /metrics``: version, gauges, counters, histograms, meters,
    timers, each a map from a Nakadi-style name to its values."""
    sections: dict[str, dict[str, Any]] = {
        "gauges": {}, "counters": {}, "histograms": {}, "meters": {}, "timers": {}}
    by_name = {family.name: family for family in families}
    for name, figure in FIGURES.items():
        family = by_name.get(name)
        if family is None:
            continue
        rates = _values(by_name.get(name + RATE_SUFFIX), "")
        for labels, samples in _by_labels(family).items():
            key = figure.name.format(**{k: v.replace(".", "#") for k, v in labels})
            value = _render(figure, samples, rates.get(labels, 0.0))
            section = sections[figure.kind + "s"]
            section[key] = value
            if key in ALIASES:
                section[ALIASES[key]] = value
    start = sections["gauges"].get("process.start_time")
    if start is not None:
        uptime = (time.time() if now is None else now) - start["value"]
        sections["gauges"]["process.uptime"] = {"value": round(uptime, 3)}
    return {"version": VERSION, **{k: dict(sorted(v.items())) for k, v in sections.items()}}


def _by_labels(family: Metric) -> dict[Labels, dict[str, Any]]:
    """The samples of each label set: ``{suffix: value}``, histogram buckets as
    ``{"buckets": [(le, cumulative count), ...]}``."""
    grouped: dict[Labels, dict[str, Any]] = defaultdict(dict)
    for sample in family.samples:
        labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
        suffix = sample.name[len(family.name):]
        if suffix == "_bucket":
            grouped[labels].setdefault("buckets", []).append(
                (float(sample.labels["le"]), sample.value))
        else:
            grouped[labels][suffix] = sample.value
    return grouped


def _values(family: Metric | None, suffix: str) -> dict[Labels, float]:
    if family is None:
        return {}
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples
            if s.name == family.name + suffix}


def _render(figure: Figure, samples: dict[str, Any], m1_rate: float) -> dict[str, Any]:
    if figure.kind == "gauge":
        return {"value": samples.get("", 0.0)}
    if figure.kind == "counter":
        return {"count": int(samples.get("", 0))}
    if figure.kind == "meter":
        return {"count": int(samples.get("_total", 0)), "m1_rate": m1_rate,
                "units": "events/second"}
    count = int(samples.get("_count", 0))
    body: dict[str, Any] = {"count": count,
                            "mean": samples.get("_sum", 0.0) * figure.scale / count if count
                            else 0.0}
    buckets = sorted(samples.get("buckets", []))
    for label, quantile in PERCENTILES:
        body[label] = _quantile(buckets, count, quantile) * figure.scale
    if figure.kind == "timer":
        body.update(m1_rate=m1_rate, duration_units="milliseconds", rate_units="calls/second")
    return body


def _quantile(buckets: list[tuple[float, float]], count: int, quantile: float) -> float:
    """A quantile estimated from cumulative histogram buckets, interpolating linearly
    within the bucket it falls in (as Prometheus's histogram_quantile does)."""
    if not count:
        return 0.0
    rank = quantile * count
    lower, below = 0.0, 0.0
    for upper, cumulative in buckets:
        if cumulative >= rank:
            if math.isinf(upper):
                return lower  # beyond the largest bound: the bound is all we know
            inside = cumulative - below
            return lower + (upper - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = upper, cumulative
    return lower
