"""gunicorn settings: gevent workers that can hold hour-long event streams.

For async workers ``timeout`` is how long a worker may go without yielding to
its hub, not how long a request may take, so streams are not cut by it; all
stream I/O yields. On SIGTERM a worker stops accepting, and open streams get
``graceful_timeout`` seconds to end cleanly (they watch ``app.lifecycle``).
"""

from __future__ import annotations

import gc
import glob
import os
import shutil
import sys
import tempfile
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gunicorn.arbiter import Arbiter
    from gunicorn.workers.base import Worker

GC_THRESHOLDS = (10_000, 20, 100)
"""Python's cycle collector runs after 700 new container objects by default: every
batch a stream reads (a tuple per event) or a publish parses set it off, and each
older-generation run walks every object of the app. Workers start it less often
and leave what start-up made out of it (``gc.freeze``); one postgres stream from
begin went from 104-189k to 175-242k events/s in paired runs (bench_stream)."""


def _fresh_metrics_dir() -> tuple[str, bool]:
    """The folder where every worker keeps its metrics (prometheus_client's multiprocess
    mode), emptied at each master start; created here unless PROMETHEUS_MULTIPROC_DIR
    names one. It must be set before anything imports prometheus_client, so this runs
    before the application is imported. Returns the folder and whether it is ours."""
    configured = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    master, _, own = os.environ.get(_PREPARED_BY, "").partition(":")
    if configured and master == str(os.getpid()):
        return configured, own == "own"  # a reload (SIGHUP): the live workers keep theirs
    if not configured:
        configured, own = tempfile.mkdtemp(prefix="nakadi-metrics-"), "own"
    else:
        os.makedirs(configured, exist_ok=True)
        for stale in glob.glob(os.path.join(configured, "*.db")):
            os.remove(stale)
        own = "given"
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = configured
    os.environ[_PREPARED_BY] = f"{os.getpid()}:{own}"
    return configured, own == "own"


_PREPARED_BY = "NAKADI_PY_METRICS_DIR_OF"  # internal: which master prepared the folder
metrics_dir, own_metrics_dir = _fresh_metrics_dir()

from app.gunicorn_chunks import write_chunks_uncopied  # noqa: E402
from app.gunicorn_errors import answer_refused_requests_as_problems  # noqa: E402
from workers.allocator import few_heaps, keep_large_blocks  # noqa: E402

answer_refused_requests_as_problems()
write_chunks_uncopied()
# Here, in the master: the workers it forks inherit them.
keep_large_blocks()
few_heaps()

bind = os.environ.get("NAKADI_BIND", "0.0.0.0:8080")
workers = int(os.environ.get("NAKADI_WORKERS", "2"))
worker_class = "gevent"
worker_connections = int(os.environ.get("NAKADI_WORKER_CONNECTIONS", "1000"))
timeout = 30
graceful_timeout = int(os.environ.get("NAKADI_GRACEFUL_TIMEOUT", "30"))
# Longer than the ~60 s idle timeout of load balancers, so they close first.
keepalive = 75
# JSON lines; the application logs each request itself, with its flow id.
logger_class = "app.logs.GunicornLogger"
errorlog = "-"
# gunicorn's own lines (start, workers, signals) follow the broker's level too.
loglevel = os.environ.get("NAKADI_LOG_LEVEL", "INFO").lower()
# gunicorn 27's control socket (for gunicornc) is one path per user: instances on one
# host unlinked each other's. Nothing here uses it.
control_socket_disable = True


def on_starting(server: Arbiter) -> None:
    """Fail fast, in one line, when a dependency is unreachable; migrate otherwise."""
    from app.config import Settings
    from app.startup import DependencyUnavailable, prepare

    log = server.log
    assert log is not None  # the arbiter made it before calling this hook
    try:
        applied = prepare(Settings.from_env())
    except (DependencyUnavailable, ValueError) as error:
        log.error("nakadi: cannot start: %s", error)
        sys.exit(1)
    if applied:
        log.info("applied migrations: %s", ", ".join(applied))
    # The master keeps gauges too (it imports the figures): unset, its 0 was the
    # smallest start time, and uptime read 56 years.
    from app.monitoring import figures

    figures.START_TIME.set(time.time())


def post_fork(server: Arbiter, worker: Worker) -> None:
    """In each worker before it serves (the no-op ceiling app runs this hook too)."""
    from app.gunicorn_settings import settings_as_attributes

    settings_as_attributes(worker.cfg)


def post_worker_init(worker: Worker) -> None:
    import gevent

    from app import lifecycle
    from app.logs import log_greenlet_failures
    from app.monitoring.ticker import start_process_figures
    from app.services import services_of
    from workers.retention import start_retention
    from workers.topic_deletions import start_sweeps

    lifecycle.attach_worker(worker)
    log_greenlet_failures()
    services = services_of(worker.wsgi)
    if services is None:
        raise RuntimeError("gunicorn must serve app.wsgi:app")
    start_retention(services)
    start_sweeps(services)
    services.publishing_gate.start()
    gevent.spawn(services.engines.warm_up)
    start_process_figures()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def worker_exit(server: Arbiter, worker: Worker) -> None:
    from app.monitoring.recording import write_counts
    from app.services import services_of

    write_counts()
    services = services_of(getattr(worker, "wsgi", None))
    if services is not None:
        services.close()
    # Collect what gc.freeze kept, discarded log handlers among it, while gevent still
    # works: finalized in the interpreter's teardown, each of those wrote "Exception
    # ignored in _removeHandlerRef" and a traceback to stderr, between the JSON lines.
    gc.unfreeze()
    gc.collect()


def pre_request(worker: Worker, req: object) -> None:
    from app import lifecycle
    from app.monitoring.ticker import request_started

    lifecycle.remember_request(req)
    request_started()


def post_request(worker: Worker, req: object, environ: object, resp: object) -> None:
    """Yield to the hub between requests: otherwise a worker serves one keep-alive
    connection back to back while others wait (measured p99 100-500 ms -> ~10 ms)."""
    import gevent

    from app.monitoring.ticker import request_finished

    request_finished()
    gevent.sleep(0)


def child_exit(server: Arbiter, worker: Worker) -> None:
    """A dead worker's gauges (its open streams, memory...) stop counting; its
    counters stay, as the instance's totals."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, metrics_dir)


def on_exit(server: Arbiter) -> None:
    if own_metrics_dir:
        shutil.rmtree(metrics_dir, ignore_errors=True)
