"""The end of a stream's response, whether or not its body was read."""

from __future__ import annotations

from collections.abc import Iterator

from flask import Flask

from app.streaming.response import stream_response


def test_the_stream_ends_when_the_response_closes_unread_or_read():
    app = Flask(__name__)
    ended: list[str] = []

    def lines() -> Iterator[bytes]:
        try:
            yield b'{"cursor":{}}\n'
        finally:
            ended.append("lines closed")

    with app.test_request_context("/"):
        unread = stream_response(lines(), lambda: ended.append("ended"))
        read = stream_response(lines(), lambda: ended.append("ended"))
    # A server that sends no body (as for a HEAD) closes the response unread: a
    # generator never started would not run its ``finally``.
    unread.close()
    assert ended == ["ended"]
    ended.clear()
    # Read to the end, the stream ended before the body's last chunk went out.
    assert b"".join(read.response) == b'{"cursor":{}}\n'
    assert ended == ["lines closed", "ended"]
    read.close()
    assert ended == ["lines closed", "ended"]  # once
