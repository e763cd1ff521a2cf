"""A client that stops reading a response is cut off after ``RESPONSE_SEND_TIMEOUT_S``.

A response larger than the socket buffers (a listing, a batch of cursor
operations, up to tens of MB) to a client that reads none of it held the
request's greenlet and the response for good: TCP never gives up on a peer that
keeps acknowledging a zero window. So the writing of a response may take that
long at most, as nginx's ``send_timeout``; then the connection is shut down and
the write fails. Streams keep their own deadlines (``app.streaming.connection``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import cast

from flask import Flask, Response

from app.current import current_flask, current_request
from app.streaming.connection import written_within


def install_send_timeout(app: Flask) -> None:
    """Register the hook; it must run after every other one that reads the body, so
    install it before them (Flask runs ``after_request`` hooks last to first)."""
    app.after_request(_bounded)


def _bounded(response: Response) -> Response:
    connection = current_request().environ.get("gunicorn.socket")
    if connection is None or response.is_streamed or not response.response:
        return response  # nothing to bound: a stream keeps its own deadlines; no body
    length = response.content_length
    if length is None:
        # werkzeug measures a body that has no length yet (``Response(status=200)``)
        # as it sends it, but only while it is a sequence: wrapped, it would go out
        # chunked, an empty body as a chunk of nothing.
        length = sum(map(len, response.iter_encoded()))
        if length:
            response.content_length = length
    if length == 0:
        return response
    body = cast(Iterable[bytes], response.response)  # a body set as data is bytes
    deadline = time.monotonic() + current_flask().config["RESPONSE_SEND_TIMEOUT_S"]
    response.response = written_within(body, connection, lambda: deadline - time.monotonic(),
                                       "a response")
    return response
