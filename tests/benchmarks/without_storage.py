"""The broker with its postgres storage left out, for ``bench_budget``: gunicorn with the
broker's own settings and hooks (``gunicorn.conf.py``), whose workers' group commit
answers every append at once, without PostgreSQL. Everything before the append runs
as in the broker (hooks, lookups, parsing, validation, enrichment, partitioning,
serialising, metrics), so the workers' CPU per request beside the whole broker's shows
what storing costs them.

    gunicorn -c python:tests.benchmarks.without_storage app.wsgi:app
"""

from __future__ import annotations

import runpy
from typing import Any

from tests.benchmarks.harness import ROOT, answer_at_once

globals().update({key: value for key, value in runpy.run_path(
    str(ROOT / "gunicorn.conf.py")).items() if not key.startswith("_")})
_broker_post_worker_init = globals()["post_worker_init"]


def post_worker_init(worker: Any) -> None:
    from app.storage.postgres_appender import GroupAppender

    _broker_post_worker_init(worker)
    GroupAppender.append = answer_at_once  # type: ignore[method-assign]
