"""Whether this worker process is shutting down, for loops that must end cleanly."""

from __future__ import annotations

_worker = None


def attach_worker(worker) -> None:
    """Called by gunicorn's ``post_worker_init`` hook with the worker object."""
    global _worker
    _worker = worker


def is_shutting_down() -> bool:
    """True once gunicorn told this worker to stop (SIGTERM, SIGQUIT, max requests)."""
    return _worker is not None and not _worker.alive
