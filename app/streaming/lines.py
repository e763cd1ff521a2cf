"""The line of one batch in an ``application/x-json-stream`` body."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson

from app.streaming.payloads import json_items

JOIN_BYTES = 256 * 1024
"""About the largest chunk ``joined`` makes of short lines; a longer line (a batch of
1,000 ~250-byte events) is a chunk of its own."""


def batch_line(cursor: dict[str, str], payloads: Sequence[bytes],
               info: dict[str, Any] | None = None) -> bytes:
    """``{"cursor": ..., "events": [...], "info": ...}`` and a newline; without
    events (a keep-alive) the line has no ``events`` field. Payloads are the
    stored events' JSON, written as they are. The pieces are joined once: each
    ``+`` of a 250 KB line copied it whole, 296 us for a batch of 1,000 events
    against 10."""
    pieces = [b'{"cursor":', orjson.dumps(cursor)]
    if payloads:
        pieces.append(b',"events":[')
        pieces += json_items(payloads)
        pieces.append(b"]")
    if info:
        pieces += (b',"info":', orjson.dumps(info))
    pieces.append(b"}\n")
    return b"".join(pieces)


def joined(*parts: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of ``parts`` in chunks of up to about ``JOIN_BYTES``; a longer line
    is a chunk of its own, not copied. One write and one chunk header per chunk
    instead of per line: a stream of 1-event batches from a backlog spent most of
    its time in the writes (two system calls each)."""
    pending: list[bytes] = []
    size = 0
    for part in parts:
        for line in part:
            if pending and size + len(line) > JOIN_BYTES:
                yield b"".join(pending)
                pending, size = [], 0
            pending.append(line)
            size += len(line)
    if pending:
        yield b"".join(pending)
