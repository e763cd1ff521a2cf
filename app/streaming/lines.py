"""The line of one batch in an ``application/x-json-stream`` body."""

from __future__ import annotations

from typing import Any

import orjson


def batch_line(cursor: dict[str, str], payloads: list[bytes],
               info: dict[str, Any] | None = None) -> bytes:
    """``{"cursor": ..., "events": [...], "info": ...}`` and a newline; without
    events (a keep-alive) the line has no ``events`` field. Payloads are the
    stored events' JSON, written as they are."""
    line = b'{"cursor":' + orjson.dumps(cursor)
    if payloads:
        line += b',"events":[' + b",".join(payloads) + b"]"
    if info:
        line += b',"info":' + orjson.dumps(info)
    return line + b"}\n"
