"""``GET /health``: whether this instance can reach everything it depends on.
``GET /health/live``: whether it answers at all.

Every dependency is asked at the same time and given a bounded time, so the
answer comes within a second whatever is down, naming what is."""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic

import gevent
from flask import Blueprint, Response, jsonify

from app.problems import problem_response
from app.services import services
from app.storage.engine import StorageEngine

blueprint = Blueprint("health", __name__)

ANSWER_WITHIN_S = 0.9
"""The whole answer, both rounds: dependencies first, then the storages they list."""


class NoAnswer(Exception):
    pass


def _probe(check: Callable[[], object], deadline: float) -> str | None:
    """None when ``check()`` passes before ``deadline``, else why it failed."""
    seconds = max(0.0, deadline - monotonic())
    try:
        with gevent.Timeout(seconds, NoAnswer(f"no answer within {ANSWER_WITHIN_S:g}s")):
            check()
    except Exception as error:  # any failure means "down"; the reason goes to the caller
        return f"{type(error).__name__}: {error}".rstrip(": ")
    return None


def _all(checks: dict[str, Callable[[], object]], deadline: float) -> dict[str, str | None]:
    probes = {name: gevent.spawn(_probe, check, deadline) for name, check in checks.items()}
    gevent.joinall(list(probes.values()))
    return {name: probe.value for name, probe in probes.items()}


@blueprint.get("/health")
def health() -> Response:
    current = services()
    deadline = monotonic() + ANSWER_WITHIN_S
    engines: dict[str, StorageEngine] = {}

    def list_engines() -> None:
        engines.update(current.engines.all())

    failures = _all({
        "postgresql": lambda: current.pool.fetch_all("SELECT 1"),
        "zookeeper": lambda: current.zookeeper.get("/"),
        "storages": list_engines,
    }, deadline - ANSWER_WITHIN_S * 0.4)
    if failures.pop("storages") is None:
        failures |= _all({f"storage:{storage_id}": engine.check
                          for storage_id, engine in engines.items()}, deadline)
    down = {name: reason for name, reason in failures.items() if reason is not None}
    states = {name: "down" if name in down else "up" for name in failures}
    if down:
        detail = "; ".join(f"{name} is down ({reason})" for name, reason in down.items())
        return problem_response(503, detail, "Service Unavailable", {"dependencies": states})
    return jsonify({"status": "OK", "dependencies": states})


@blueprint.get("/health/live")
def live() -> Response:
    """200 whenever a worker answers, asking no dependency: what orchestrators' probes
    should ask. An outage of PostgreSQL, ZooKeeper or a storage fails ``/health`` on
    every instance at once; taken out of the load balancer, they would stop serving
    what still works (publishing while ZooKeeper is down, postgres event types while
    Kafka is), and restarted, they would not start while it lasts."""
    return jsonify({"status": "OK"})
