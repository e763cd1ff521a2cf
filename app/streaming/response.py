"""The HTTP response of an event stream, whatever produces its lines."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Generator, Iterator

from flask import Response, request

from app import lifecycle

STREAM_CONTENT_TYPE = "application/x-json-stream"


def stream_response(lines: Generator[bytes, None, None], on_end: Callable[[], None],
                    headers: dict[str, str] | None = None) -> Response:
    """A chunked response of the stream's lines. The headers go out at once, before
    any batch; the body is gzipped when the client accepts it; when the stream
    ends, ``on_end`` runs (also when the client left early) and the connection is
    closed, as Nakadi does: some clients read until the socket closes."""
    compress = request.accept_encodings["gzip"] > 0

    def body() -> Iterator[bytes]:
        try:
            yield b""  # the headers go out now
            yield from gzipped(lines) if compress else lines
        finally:
            lines.close()
            on_end()

    lifecycle.close_connection_after_response()
    response = Response(body(), content_type=STREAM_CONTENT_TYPE)
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass batches on as they come
    if compress:
        response.headers["Content-Encoding"] = "gzip"
    response.headers.update(headers or {})
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
