"""The JSON body of a request as clients send it: declared ``application/json``,
possibly gzip-compressed (Nakadi undoes gzip on every POST, and clients such as
fahrschein compress all their POSTs once told to), bounded in size and in how
long it may stop arriving, and parsed by the application's strict rules
(``app.input_guard``)."""

from __future__ import annotations

import re
import zlib
from typing import Any

from app import lifecycle
from app.api.params import require_json_content_type
from app.current import current_flask, current_request
from app.problems import Problem
from app.strict_json import InvalidJson

GZIP_ENCODINGS = ("gzip", "x-gzip")  # RFC 9110: x-gzip is gzip
GZIP_SLICE = 64 * 1024
MAX_GZIP_MEMBERS = 10_000
"""Clients compress a body as one member, or concatenate a few; each member costs a
decompressor of its own."""
NOT_PADDING = re.compile(rb"[^\x00]")


class GzipInvalid(ValueError):
    """The bytes are not a complete gzip stream."""


def gunzip(data: bytes, limit: int) -> bytes:
    """Every member of a gzip stream, decompressed; stops after ``limit + 1`` bytes
    so that a small body cannot expand without bound. Each member is fed in slices of
    the body, never the rest of it: ``unused_data`` is a copy of what was fed past the
    member's end, and a body of many tiny members took time in the square of its size
    (10 MB of empty members held a worker past its timeout)."""
    out = bytearray()
    view = memoryview(data)
    start = members = 0
    while True:
        members += 1
        if members > MAX_GZIP_MEMBERS:
            raise GzipInvalid(f"the gzip body holds more than {MAX_GZIP_MEMBERS} members; "
                              "compress the body as one")
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        while not inflater.eof:
            fed = view[start:start + GZIP_SLICE]
            if not fed:
                raise GzipInvalid("the gzip body is truncated")
            start += len(fed)
            try:
                out += inflater.decompress(fed, limit + 1 - len(out))
            except zlib.error as error:
                raise GzipInvalid(f"the body is not valid gzip: {error}") from None
            if len(out) > limit:  # else the output bound left no input unconsumed
                return bytes(out)
        start -= len(inflater.unused_data)
        following = NOT_PADDING.search(data, start)  # gzip allows zeros between members
        if following is None:
            return bytes(out)
        start = following.start()


def json_body() -> Any:
    """The request body's JSON value: a 400 saying why when it is not standard JSON
    or holds a NUL character, and the statuses of ``json_bytes`` (at most
    ``NAKADI_MAX_BODY_BYTES``; event batches are read by their own limit)."""
    try:
        app = current_flask()
        return app.json.loads(json_bytes(app.config["MAX_BODY_BYTES"]))
    except InvalidJson as error:
        raise Problem(400, f"the body is not valid JSON: {error}") from None


def optional_json_body(default: Any) -> Any:
    """The body's JSON value, as ``json_body``, or ``default`` when the request has
    none: no ``Content-Length`` above 0 and no chunked body (clients that stream
    their request bodies send them chunked, without a length)."""
    asked = current_request()
    chunked = "chunked" in asked.headers.get("Transfer-Encoding", "").lower()
    if not asked.content_length and not chunked:
        return default
    return json_body()


def json_bytes(limit: int) -> bytes:
    """The request body, gunzipped when sent with ``Content-Encoding: gzip``: a 415 for
    another type or encoding, a 400 for broken gzip, a 413 above ``limit`` bytes."""
    require_json_content_type()
    body = _sent_body(limit)
    encoding = current_request().headers.get("Content-Encoding", "identity").strip().lower()
    if encoding in GZIP_ENCODINGS:
        try:
            body = gunzip(body, limit)
        except GzipInvalid as error:
            raise Problem(400, str(error)) from None
    elif encoding not in ("identity", ""):
        raise Problem(415, f"Content-Encoding '{encoding}' is not supported; use gzip")
    if len(body) > limit:
        raise _too_large(limit)
    return body


def _sent_body(limit: int) -> bytes:
    """The body as sent, each read of it waiting at most ``REQUEST_BODY_TIMEOUT_S``
    for the client (then a 408, and the connection closes)."""
    connection = current_request().environ.get("gunicorn.socket")
    if connection is None:
        return _read_body(limit)
    waited = connection.gettimeout()
    timeout_s = current_flask().config["REQUEST_BODY_TIMEOUT_S"]
    connection.settimeout(timeout_s)
    try:
        return _read_body(limit)
    except TimeoutError:
        lifecycle.close_connection_after_response()  # the rest of the body may still come
        raise Problem(408, "the request body stopped arriving: no byte came for "
                           f"{timeout_s:g} s") from None
    finally:
        connection.settimeout(waited)


def _read_body(limit: int) -> bytes:
    """Read from the server's input stream itself, not through werkzeug's: a body
    that ends before its ``Content-Length`` is an incomplete message, never to be
    acted on (RFC 9112, section 8), which werkzeug's stream passed on as if whole,
    and werkzeug turns a read that timed out into a 400. One read also takes half
    the CPU of werkzeug's three (~15 against ~30 us for a commit's ~150 bytes)."""
    asked = current_request()
    most = min(limit, asked.max_content_length or limit)
    length = asked.content_length
    if length is not None and length > most:
        raise _too_large(most)
    stream = asked.environ["wsgi.input"]
    if length is None:  # chunked, or no body
        body: bytes = stream.read(most + 1)
        if len(body) > most:
            raise _too_large(most)
        return body
    body = stream.read(length)
    if len(body) < length:
        raise Problem(400, f"the body ended after {len(body)} of the {length} bytes its "
                           "Content-Length announced; send the whole body")
    return body


def _too_large(limit: int) -> Problem:
    return Problem(413, f"the request body is larger than {limit} bytes; send less at once")
