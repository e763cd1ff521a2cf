"""What the application needs from the gunicorn worker serving it: whether the
worker is shutting down, and a way to close a connection once its response ends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gevent.local

if TYPE_CHECKING:
    from gunicorn.workers.base import Worker

_worker: Worker | None = None
# Each connection is served by its own greenlet, one request after the other.
_current = gevent.local.local()


def attach_worker(worker: Worker) -> None:
    """Called by gunicorn's ``post_worker_init`` hook with the worker object."""
    global _worker
    _worker = worker


def is_shutting_down() -> bool:
    """True once gunicorn told this worker to stop (SIGTERM, SIGQUIT, max requests)."""
    return _worker is not None and not _worker.alive


def remember_request(request: Any) -> None:
    """Called by gunicorn's ``pre_request`` hook with its request object."""
    _current.request = request


def close_connection_after_response() -> None:
    """Answer the current request with ``Connection: close`` and close the connection
    when the response ends. A WSGI application cannot do this with a header (gunicorn
    drops hop-by-hop headers), so it marks gunicorn's request, as a client's
    ``Connection: close`` would. Outside gunicorn it does nothing."""
    request = getattr(_current, "request", None)
    if request is not None:
        request.must_close = True


def close_connection_when_shutting_down(response: Any) -> Any:
    """``after_request``: once the worker stops, a response that was being prepared
    (a publish in flight) still goes out whole, but with ``Connection: close``, so
    that the client does not send more on it and the idle connection does not hold
    the stopping worker until ``graceful_timeout``."""
    if is_shutting_down():
        close_connection_after_response()
    return response
