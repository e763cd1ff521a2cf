"""The ceiling of the web stack: an application that does nothing, served by gunicorn
with the broker's own settings (``gunicorn.conf.py``: gevent workers, connections,
keep-alive, the yield after each request, chunks sent uncopied, settings read as
plain attributes), without the hooks that start and stop the broker's services.

    gunicorn -c python:tests.benchmarks.noop_app tests.benchmarks.noop_app:app

- ``POST /event-types/<name>/events`` reads the body and answers 200 empty, as
  a successful publish does;
- ``GET /event-types/<name>/events?batch_limit=N&stream_limit=M`` streams M
  events in pre-built lines of N stored-looking events, chunked, as the
  low-level stream sends them;
- ``GET /health`` for the harness to see it is up.
"""

from __future__ import annotations

import runpy
from collections.abc import Iterator

from flask import Flask, Response, request

from tests.benchmarks.bench_publish import stored_event
from tests.benchmarks.harness import ROOT

# gunicorn reads the settings of this module: the broker's, minus its service hooks.
_BROKER_HOOKS = ("on_starting", "post_worker_init", "worker_exit")
globals().update({key: value for key, value in runpy.run_path(
    str(ROOT / "gunicorn.conf.py")).items()
    if not key.startswith("_") and key not in _BROKER_HOOKS})

app = Flask(__name__)


def batch_lines(batch_limit: int, count: int) -> Iterator[bytes]:
    """``count`` events in lines of ``batch_limit``, each line built once."""
    cursor = b'{"cursor":{"partition":"0","offset":"001-0001-000000000000000042"},"events":['
    events = b",".join(stored_event(n) for n in range(batch_limit))
    line = cursor + events + b"]}\n"
    for _ in range(count // batch_limit):
        yield line
    if count % batch_limit:
        yield cursor + b",".join(stored_event(n) for n in range(count % batch_limit)) + b"]}\n"


@app.post("/event-types/<name>/events")
def publish(name: str) -> Response:
    request.get_data(cache=False)
    return Response(status=200)


@app.get("/event-types/<name>/events")
def stream(name: str) -> Response:
    batch_limit = int(request.args.get("batch_limit", "1"))
    count = int(request.args.get("stream_limit", "1000000"))

    def body() -> Iterator[bytes]:
        yield b""
        yield from batch_lines(batch_limit, count)

    return Response(body(), content_type="application/x-json-stream")


@app.get("/health")
def health() -> Response:
    return Response(b'{"status":"OK"}', content_type="application/json")
