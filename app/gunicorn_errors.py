"""Requests gunicorn refuses before the application sees them (a request line or
headers too long, a malformed chunked body) are answered as Problems too, not
with gunicorn's HTML page: clients parse every error the same way."""

from __future__ import annotations

import json
import socket

from gunicorn import util

from app.problems import CONTENT_TYPE, PROBLEM_TYPE


def write_problem(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """Stands in for ``gunicorn.util.write_error``, with the same arguments."""
    body = json.dumps({"type": PROBLEM_TYPE.format(status=status_int), "title": reason,
                       "status": status_int, "detail": mesg or reason}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: {CONTENT_TYPE}\r\nContent-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, head.encode("latin-1") + body)


def answer_refused_requests_as_problems() -> None:
    util.write_error = write_problem
