"""Requests gunicorn refuses before the application sees them (a request line or
headers too long, a malformed chunked body) are answered as Problems too, not
with gunicorn's HTML page: clients parse every error the same way."""

from __future__ import annotations

import contextlib
import json
import socket
import time

from gunicorn import util

from app.problems import CONTENT_TYPE, PROBLEM_TYPE


def write_problem(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """Stands in for ``gunicorn.util.write_error``, with the same arguments."""
    body = json.dumps({"type": PROBLEM_TYPE.format(status=status_int), "title": reason,
                       "status": status_int, "detail": mesg or reason}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: {CONTENT_TYPE}\r\nContent-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, head.encode("latin-1") + body)
    _drain(sock)


DRAIN_S = 2.0
DRAIN_BYTES = 1 << 20


def _drain(sock: socket.socket) -> None:
    """Reads what the client is still sending, up to a bound, before gunicorn closes
    the socket. Closing a socket with unread bytes makes the kernel send a reset,
    and the client would lose the Problem just written (a long request line or a
    huge header is refused while the rest of the request is still on its way)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + DRAIN_S
        read = 0
        while read < DRAIN_BYTES and (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                return
            read += len(chunk)


def answer_refused_requests_as_problems() -> None:
    util.write_error = write_problem
