"""Whether this worker process is shutting down, for loops that must end cleanly."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gunicorn.workers.base import Worker

_worker: Worker | None = None


def attach_worker(worker: Worker) -> None:
    """Called by gunicorn's ``post_worker_init`` hook with the worker object."""
    global _worker
    _worker = worker


def is_shutting_down() -> bool:
    """True once gunicorn told this worker to stop (SIGTERM, SIGQUIT, max requests)."""
    return _worker is not None and not _worker.alive
