"""What each worker refreshes every few seconds in a greenlet: its process figures
(memory, threads, file descriptors, CPU, garbage collections) and the one-minute
rates of its meters and timers (Dropwizard's exponentially weighted ``m1_rate``)."""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import os
import resource
import time

import gevent

from app.monitoring import figures

TICK_S = 5.0
_ALPHA = 1 - math.exp(-TICK_S / 60.0)  # one-minute moving average, ticking every 5 s
RATE_FLOOR = 1e-3  # per second

log = logging.getLogger(__name__)


class RateTracker:
    """The moving one-minute rates of this process's counters."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, tuple[str, ...]], float] = {}
        self._rates: dict[tuple[str, tuple[str, ...]], float] = {}

    def tick(self, interval_s: float = TICK_S) -> None:
        for name, gauge in figures.M1_RATES.items():
            figure = figures.FIGURES[name]
            total = name + ("_count" if figure.kind == "timer" else "_total")
            labelnames = figure.metric._labelnames
            for family in figure.metric.collect():
                for sample in family.samples:
                    if sample.name != total:
                        continue
                    values = tuple(sample.labels[label] for label in labelnames)
                    key = (name, values)
                    instant = (sample.value - self._last.get(key, 0.0)) / interval_s
                    self._last[key] = sample.value
                    previous = self._rates.get(key)
                    rate = instant if previous is None else previous + _ALPHA * (
                        instant - previous)
                    if rate < RATE_FLOOR:
                        rate = 0.0  # decayed to nothing: idle series stop being written
                    if rate != previous:
                        self._rates[key] = rate
                        gauge.labels(*values).set(rate)


_active_requests = 0


def request_started() -> None:
    """gunicorn's ``pre_request``: one more request (or stream) being served."""
    global _active_requests
    _active_requests += 1


def request_finished() -> None:
    """gunicorn's ``post_request``, once the response (a whole stream) is sent."""
    global _active_requests
    _active_requests -= 1


def refresh_process_figures() -> None:
    """This worker's process figures, read from /proc where there is one."""
    figures.WORKERS.set(1)
    figures.ACTIVE_REQUESTS.set(_active_requests)
    status = _proc_status()
    if "VmRSS" in status:
        figures.MEMORY.set(int(status["VmRSS"].split()[0]) * 1024)
    else:
        figures.MEMORY.set(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    figures.THREADS.set(int(status.get("Threads", "1")))
    with contextlib.suppress(OSError):
        figures.OPEN_FDS.set(len(os.listdir("/proc/self/fd")))
    figures.MAX_FDS.set(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    figures.CPU_SECONDS.set(usage.ru_utime + usage.ru_stime)
    for generation, stats in enumerate(gc.get_stats()):
        figures.GC_COLLECTIONS.labels(str(generation)).set(stats["collections"])


def _proc_status() -> dict[str, str]:
    try:
        with open("/proc/self/status") as status:
            return dict(line.rstrip("\n").split(":\t", 1) for line in status if ":\t" in line)
    except OSError:
        return {}


def start_process_figures() -> gevent.Greenlet:
    """Start this worker's ticker (gunicorn's ``post_worker_init``)."""
    figures.START_TIME.set(time.time())
    rates = RateTracker()

    def loop() -> None:
        while True:
            try:
                refresh_process_figures()
                rates.tick()
            except Exception:
                log.exception("refreshing the process figures failed")
            gevent.sleep(TICK_S)
    return gevent.spawn(loop)
