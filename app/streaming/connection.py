"""Noticing, without writing to it, that a stream's client has gone away."""

from __future__ import annotations

import select
import socket

from gevent import monkey

# The operating system's poll, not gevent's select: gevent's select.select hands
# the descriptors to the real select() first, which refuses any numbered 1024 or
# more, and a worker holding a thousand streams has many of those.
_poll = monkey.get_original("select", "poll")
_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR


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
