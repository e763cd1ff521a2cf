"""A stream's client: noticing, without writing to it, that it has gone away, and
cutting it off when it stops reading past the stream's deadline."""

from __future__ import annotations

import contextlib
import logging
import select
import socket
from collections.abc import Callable, Iterable, Iterator

import gevent
from gevent import monkey

# The operating system's poll, not gevent's select: gevent's select.select hands
# the descriptors to the real select() first, which refuses any numbered 1024 or
# more, and a worker holding a thousand streams has many of those.
_poll = monkey.get_original("select", "poll")
_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR

LAST_WRITE_S = 5.0
"""How long a write that starts at or after the stream's deadline (its last lines)
may wait for the client to read."""

log = logging.getLogger(__name__)


def client_gone(connection: socket.socket | None) -> bool:
    """True when the client closed its side (the socket reads as end of file)."""
    if connection is None:
        return False
    try:
        poller = _poll()
        poller.register(connection.fileno(), _READABLE)
        if not poller.poll(0):
            return False
        return connection.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class _Deadline:
    """The timer of one write: when it fires, the deadline is asked again and either
    set anew or enforced. A class, not a closure that restarts itself: a function
    that refers to itself is a reference cycle, garbage only the cycle collector
    frees, and a write is made for every chunk of every stream (with 2,000 idle
    streams, collections of it held the worker for up to ~100 ms)."""

    __slots__ = ("_connection", "_loop", "_time_left", "_timer", "_what")

    def __init__(self, connection: socket.socket, time_left: Callable[[], float],
                 what: str) -> None:
        self._connection = connection
        self._time_left = time_left
        self._what = what
        self._loop = gevent.get_hub().loop
        self._timer = self._loop.timer(max(time_left(), LAST_WRITE_S))
        self._timer.start(self._due, update=True)  # from now, not the loop's last turn

    def _due(self) -> None:
        self._timer.close()
        left = self._time_left()
        if left > 0:
            self._timer = self._loop.timer(left)
            self._timer.start(self._due, update=True)
            return
        log.warning("the client of %s read too little of it before its deadline: "
                    "closing the connection", self._what)
        with contextlib.suppress(OSError):
            self._connection.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._timer.close()  # drops its callback, and so its reference to this


@contextlib.contextmanager
def write_deadline(connection: socket.socket | None, time_left: Callable[[], float] | None,
                   what: str = "a stream") -> Iterator[None]:
    """Around a write of ``what`` (a stream's lines, or a response) to
    ``connection``: when the client has read too little for it to finish by the
    deadline (``time_left``, asked again when it comes, since a commit moves a
    subscription stream's; None for no deadline), the connection is shut down,
    which fails the write, and so ends the stream or the response.

    A stream waiting on a client that stopped reading checks no limit of its own:
    without this, a stuck consumer that kept its connection open held its
    partitions past ``commit_timeout`` and ``stream_timeout``, for good."""
    if connection is None or time_left is None:
        yield
        return
    deadline = _Deadline(connection, time_left, what)
    try:
        yield
    finally:
        deadline.close()


def written_within(parts: Iterable[bytes], connection: socket.socket | None,
                   time_left: Callable[[], float] | None, what: str = "a stream"
                   ) -> Iterator[bytes]:
    """``parts`` as a WSGI body, each under ``write_deadline`` while the server writes
    it: the server writes a part while this generator waits at its ``yield``."""
    for part in parts:
        with write_deadline(connection, time_left, what):
            yield part
