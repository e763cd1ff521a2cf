"""``GET /health``: whether this instance can reach everything it depends on."""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, Response, jsonify

from app.problems import problem_response
from app.services import services

blueprint = Blueprint("health", __name__)


def _probe(check: Callable[[], object]) -> str | None:
    """None when ``check()`` passes, else why it failed."""
    try:
        check()
    except Exception as error:  # any failure means "down"; the reason goes to the caller
        return f"{type(error).__name__}: {error}".rstrip(": ")
    return None


@blueprint.get("/health")
def health() -> Response:
    current = services()
    failures: dict[str, str | None] = {
        "postgresql": _probe(lambda: current.pool.fetch_all("SELECT 1")),
        "zookeeper": _probe(lambda: current.zookeeper.get("/")),
    }
    if failures["postgresql"] is None:
        try:
            engines = current.engines.all()
        except Exception as error:
            failures["storages"] = str(error)
        else:
            for storage_id, engine in engines.items():
                failures[f"storage:{storage_id}"] = _probe(engine.check)
    down = {name: reason for name, reason in failures.items() if reason is not None}
    if down:
        detail = "; ".join(f"{name} is down ({reason})" for name, reason in down.items())
        return problem_response(503, detail, "Service Unavailable")
    return jsonify({"status": "OK", "dependencies": {name: "up" for name in failures}})
