"""Where a single-event publish spends its CPU: the per-request budget of issue 14.

    python -m tests.benchmarks.bench_budget [--rounds 3] [--seconds 6] [--calls 20000]

Under load (``wrk``, 16 connections, 2 gevent workers, the postgres engine), in
alternated rounds, it prints the CPU that the gunicorn serving each of three servers
spends per request (the first two started and stopped around their runs, so that no
other broker's connections hear the broker's commits):
- the no-op app (``noop_app``): gunicorn, gevent and Flask alone;
- the broker with its storage left out (``without_storage``): the broker's hooks
  and publishing steps on top;
- the whole broker: its group commit on top, and PostgreSQL's CPU per request beside.

Then it times each step of the request in this process, in a request context of the
broker's application on the same local stack: µs a call, the best of three runs of
``--calls`` calls. On a fast machine they added up to about half the difference
between the first two servers: the same code costs more in a loaded worker than in a
loop that runs it hot.

Per-process CPU comes from /proc. py-spy is not used: sampling a gevent worker with
``--nonblocking``, it put 13-20% of the samples on the group commit's
``cursor.execute`` line, where ``perf`` found psycopg2 and libpq under 1%
(2026-11-28, late evening, in the benchmarks' history).
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import sys
import time
import timeit
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gevent
import orjson
from flask import Flask, Response

from app import create_app
from app.api.body import json_bytes
from app.api.lookups import event_type_or_404
from app.config import Settings
from app.monitoring import recording
from app.publishing.batch import dumps, parse_batch
from app.publishing.enrichment import enrich
from app.publishing.late_appends import checked_append
from app.publishing.partitioning import partitioner
from app.publishing.publisher import publish
from app.registry.timestamps import rfc3339_now
from app.registry.validator_cache import VALIDATORS
from app.security.guard import require_event_type
from app.security.policy import Operation
from app.services import services
from app.storage.postgres_appender import GroupAppender
from tests.benchmarks.bench_all import NOOP
from tests.benchmarks.bench_publish import create_event_type, order_event, saturate, workers_cpu_s
from tests.benchmarks.harness import (
    answer_at_once,
    postgres_cpu_s,
    running_broker,
    set_default_storage,
    start_server,
    stop_server,
)

CONNECTIONS = 16
WORKERS = 2
SERVERS = {
    "no-op app": NOOP,
    "broker, storage left out": ("python:tests.benchmarks.without_storage", "app.wsgi:app"),
    "broker": None,  # the one running_broker started
}


def per_request_us(env: dict[str, str], port: int, path: str, body_path: Path,
                   seconds: float) -> tuple[float, float, float | None]:
    """Requests/s under wrk, and the CPU µs per request of the gunicorn serving ``port``
    and of PostgreSQL (None when it runs elsewhere)."""
    url = f"http://127.0.0.1:{port}{path}"
    saturate(url, body_path, CONNECTIONS, 2)  # not measured: the first requests' misses
    workers, database = workers_cpu_s(port), postgres_cpu_s(env["NAKADI_DATABASE_URL"])
    rate, _, _ = saturate(url, body_path, CONNECTIONS, seconds)
    requests = rate * seconds
    workers_us = (workers_cpu_s(port) - workers) / requests * 1e6
    database_after = postgres_cpu_s(env["NAKADI_DATABASE_URL"])
    database_us = None if database is None or database_after is None else \
        (database_after - database) / requests * 1e6
    return rate, workers_us, database_us


def under_load(env: dict[str, str], port: int, name: str, work_dir: Path,
               args: argparse.Namespace) -> None:
    body_path = work_dir / "budget.json"
    body_path.write_bytes(json.dumps([order_event(0)]).encode())
    path = f"/event-types/{name}/events"
    results: dict[str, list[tuple[float, float, float | None]]] = {s: [] for s in SERVERS}
    print(f"under load: wrk {CONNECTIONS} connections, {WORKERS} gevent workers, "
          f"{args.seconds:.0f} s a run, one ~250-byte event a request (postgres)")
    print(f"{'round':>5} {'server':26} {'req/s':>8} {'workers µs/req':>15} "
          f"{'PostgreSQL µs/req':>18}")
    for round_number in range(1, args.rounds + 1):
        for server, started in SERVERS.items():
            if started is None:
                result = per_request_us(env, port, path, body_path, args.seconds)
            else:
                config, app = started
                other, other_port = start_server(env, WORKERS, config, app)
                try:
                    result = per_request_us(env, other_port, path, body_path, args.seconds)
                finally:
                    stop_server(other)
            results[server].append(result)
            rate, workers_us, database_us = result
            database = "" if database_us is None else f"{database_us:18.0f}"
            print(f"{round_number:>5} {server:26} {rate:8,.0f} {workers_us:15.0f} {database}",
                  flush=True)
    medians = {server: statistics.median(r[1] for r in runs) for server, runs in results.items()}
    noop, without, whole = medians.values()
    print(f"medians: gunicorn, gevent and Flask {noop:.0f} µs; the broker's hooks and "
          f"publishing steps +{without - noop:.0f} µs; storing (the group commit) "
          f"+{whole - without:.0f} µs a request")


@contextmanager
def storage_left_out() -> Iterator[None]:
    real = GroupAppender.append
    GroupAppender.append = answer_at_once  # type: ignore[method-assign]
    try:
        yield
    finally:
        GroupAppender.append = real  # type: ignore[method-assign]


def publish_environ(name: str, body: bytes) -> dict[str, Any]:
    return {"REQUEST_METHOD": "POST", "PATH_INFO": f"/event-types/{name}/events",
            "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1", "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body),
            "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr}


def steps_of(app: Flask, name: str, body: bytes, environ: dict[str, Any]
             ) -> list[tuple[str, Callable[[], Any]]]:
    """Each step of publishing ``body`` to ``name``, to call in its request context
    (whose ``environ`` the steps that read the body fill again)."""
    current = services()
    event_type, timelines = event_type_or_404(name)
    events, _ = parse_batch(body, current.settings.max_batch_events)
    sent = orjson.dumps(events[0])
    enriched = orjson.loads(sent)
    enrich(enriched, name, event_type.schema.version, "flow", rfc3339_now())
    partition_of = partitioner(event_type, timelines.active.partitions)
    view = app.view_functions["events.publish_events"]

    def read_body() -> bytes:
        environ["wsgi.input"] = io.BytesIO(body)
        return json_bytes(current.settings.max_batch_bytes)

    def handle() -> Response:
        environ["wsgi.input"] = io.BytesIO(body)
        return view(name=name)

    def recorded() -> None:
        with recording.publishing(name, current.kpis, None) as report:
            report.stored, report.body_bytes, report.status = 1, len(body), 200

    def gated() -> None:
        with current.publishing_gate.publishing(name):
            pass

    def published() -> None:
        active = timelines.active
        publish(event_type, active, checked_append(current, active, lambda: False),
                [orjson.loads(sent)], None, "flow")

    def requested() -> None:
        for _ in app(publish_environ(name, body), lambda status, headers: None):
            pass

    return [
        ("before-request hooks (flow id, input guard, authentication)",
         app.preprocess_request),
        ("event type from the cache (the handler asks twice)", lambda: event_type_or_404(name)),
        ("authorization", lambda: require_event_type(event_type, Operation.WRITE)),
        ("reading the body", read_body),
        ("parsing", lambda: parse_batch(body, current.settings.max_batch_events)),
        ("validation", lambda: VALIDATORS.validator_for(event_type).all_valid(events)),
        ("enrichment (with parsing the event again)",
         lambda: enrich(orjson.loads(sent), name, event_type.schema.version, "flow",
                        rfc3339_now())),
        ("  parsing the event again, alone", lambda: orjson.loads(sent)),
        ("partitioning", lambda: partition_of(enriched)),
        ("serialising", lambda: dumps(enriched)),
        ("validation to the append, together (with parsing the event again)", published),
        ("timeline switch gate", gated),
        ("metrics", recorded),
        ("the response", lambda: Response(status=200)),
        ("after-request hooks (with the response)",
         lambda: app.process_response(Response(status=200))),
        ("the whole handler, storage left out", handle),
        ("the whole request through Flask, storage left out", requested),
    ]


def wait_until_in_step(name: str, timeout_s: float = 10.0) -> None:
    """Until the publishing gate follows the timeline switches (its ZooKeeper session is
    up): before, every append asks the database whether a switch missed it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with services().publishing_gate.publishing(name) as missed_switch:
            if not missed_switch():
                return
        gevent.sleep(0.1)
    raise RuntimeError(f"the publishing gate did not follow switches within {timeout_s:g} s")


def in_process(env: dict[str, str], name: str, calls: int) -> None:
    app = create_app(Settings.from_env(dict(env, NAKADI_LOG_LEVEL="WARNING")))
    body = json.dumps([order_event(0)]).encode()
    print(f"\nin this process, each step alone (µs a call, best of 3 x {calls:,} calls):")
    with app.request_context(publish_environ(name, body)) as context, storage_left_out():
        try:
            services().publishing_gate.start()
            wait_until_in_step(name)
            app.preprocess_request()
            for label, step in steps_of(app, name, body, context.request.environ):
                seconds = min(timeit.repeat(step, number=calls, repeat=3))
                print(f"{seconds / calls * 1e6:8.2f}  {label}", flush=True)
        finally:
            services().close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds under load")
    parser.add_argument("--seconds", type=float, default=6.0, help="per run under load")
    parser.add_argument("--calls", type=int, default=20_000, help="per timing of a step")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install wrk")
    with running_broker(WORKERS) as (env, port, work_dir):
        set_default_storage(env["NAKADI_DATABASE_URL"], "postgres")
        name = create_event_type(f"http://127.0.0.1:{port}")
        under_load(env, port, name, work_dir, args)
        in_process(env, name, args.calls)


if __name__ == "__main__":
    main()
