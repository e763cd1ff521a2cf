"""The HTTP response of an event stream, whatever produces its lines."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Generator, Iterator
from itertools import chain

from flask import Response, request

from app import lifecycle
from app.problems import Problem
from app.streaming.connection import written_within

STREAM_CONTENT_TYPE = "application/x-json-stream"


def stream_response(lines: Generator[bytes, None, None], on_end: Callable[[], None],
                    headers: dict[str, str] | None = None,
                    time_left: Callable[[], float] | None = None) -> Response:
    """A chunked response of the stream's lines. The headers go out at once, before
    any batch; the body is gzipped when the client accepts it; a client that stops
    reading is cut off once the stream is past its deadline (``time_left``, see
    ``write_deadline``); when the stream ends, ``on_end`` runs (also when the
    client left early, and when the body was never read) and the connection is
    closed, as Nakadi does: some clients read until the socket closes. The headers
    do not announce it (``Connection: close``): told so, Python's ``http.client``
    gives the connection's socket up before the body, and clients that read the
    stream from that socket (pyNakadi) cannot start."""
    compress = _gzip_accepted()
    connection = request.environ.get("gunicorn.socket")
    ended = False

    def end() -> None:
        nonlocal ended
        if not ended:
            ended = True
            lifecycle.close_connection_after_response()
            lines.close()
            on_end()

    def body() -> Iterator[bytes]:
        try:
            chunks = gzipped(lines) if compress else lines
            # b"": the headers go out now
            yield from written_within(chain((b"",), chunks), connection, time_left)
        finally:
            # Before the body's last chunk: a client that reconnects at once finds
            # the stream's partitions free.
            end()

    response = _with_stream_headers(Response(body()), compress)
    response.headers.update(headers or {})
    # Also run by the response's close, which the WSGI server calls whether or not it
    # read the body (it reads none for a HEAD): a generator never started does not
    # run its ``finally``.
    response.call_on_close(end)
    return response


def refuse_while_shutting_down() -> None:
    """A 503 for a stream asked of a worker told to stop. gunicorn's gevent worker
    closes its listeners only on its next tick (up to a second later); a stream
    opened meanwhile would end at once, a 200 without a line, and a client that
    reconnects at once would go round on such streams until the listeners close."""
    if lifecycle.is_shutting_down():
        raise Problem(503, "this instance is shutting down; open the stream again "
                           "(another instance serves it)")


def stream_head() -> Response:
    """The answer to a HEAD of a stream: the headers its GET would start with, no
    body, and no stream opened (a HEAD has no side effects, and a stream claims
    partitions). An empty iterator, not an empty body, so that no Content-Length of
    0 is sent: the GET's body has no length."""
    return _with_stream_headers(Response(iter(())), _gzip_accepted())


def _gzip_accepted() -> bool:
    return request.accept_encodings["gzip"] > 0


def _with_stream_headers(response: Response, compress: bool) -> Response:
    response.content_type = STREAM_CONTENT_TYPE
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass batches on as they come
    if compress:
        response.headers["Content-Encoding"] = "gzip"
    return response


def gzipped(lines: Generator[bytes, None, None]) -> Iterator[bytes]:
    """The lines gzip-compressed, each flushed so the client can read it at once."""
    compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        for line in lines:
            yield compressor.compress(line) + compressor.flush(zlib.Z_SYNC_FLUSH)
        yield compressor.flush(zlib.Z_FINISH)
    finally:
        lines.close()
