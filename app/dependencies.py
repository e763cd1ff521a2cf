"""One meaning for "a dependency is down": ``DependencyUnavailable``, answered as a
503 Problem with ``Retry-After`` by ``app.problems``.

Code that knows which dependency failed raises ``DependencyUnavailable`` (or a
subclass: ``ZooKeeperUnavailable``, ``StorageUnavailable``). Errors of the
client libraries that mean the same thing (a lost PostgreSQL connection, a lost
ZooKeeper session) are recognised by ``unavailable_from`` wherever they escape
a handler, so no handler needs its own try/except for outages.
"""

from __future__ import annotations

import psycopg2
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.gevent import SequentialGeventHandler

RETRY_AFTER_S = 3
"""What a 503 tells the client to wait before trying again: about the time the
broker takes to serve again once the dependency is back."""

_ZOOKEEPER_ERRORS = (ConnectionLoss, SessionExpiredError, ConnectionClosedError,
                     OperationTimeoutError, SequentialGeventHandler.timeout_exception)


class DependencyUnavailable(Exception):
    """A dependency (PostgreSQL, ZooKeeper, a storage) cannot serve right now."""

    def __init__(self, dependency: str, reason: str) -> None:
        super().__init__(f"{dependency} is unavailable: {reason}")
        self.dependency = dependency
        self.reason = reason


def first_line(error: BaseException) -> str:
    """The first line of an error's message (libpq's run over several), or its type."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def is_database_outage(error: BaseException) -> bool:
    """Whether a psycopg2 error means the server is unreachable or the connection
    lost (as opposed to a query the server refused)."""
    return isinstance(error, psycopg2.OperationalError | psycopg2.InterfaceError)


def unavailable_from(error: BaseException) -> DependencyUnavailable | None:
    """The outage an exception means, or None when it means something else."""
    if isinstance(error, DependencyUnavailable):
        return error
    if is_database_outage(error):
        return DependencyUnavailable("PostgreSQL", first_line(error))
    if isinstance(error, _ZOOKEEPER_ERRORS):
        return DependencyUnavailable("ZooKeeper", type(error).__name__)
    return None
