"""Noticing, without writing to it, that a stream's client has gone away."""

from __future__ import annotations

import select
import socket


def client_gone(connection: socket.socket | None) -> bool:
    """True when the client closed its side (the socket reads as end of file)."""
    if connection is None:
        return False
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True
