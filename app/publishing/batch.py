"""Reading a published batch: the JSON array of events, and each event's size
as it appeared in the request (the spec counts whitespace towards the limit)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from app import strict_json

MAX_EVENT_BYTES = 999_000
WHITESPACE = " \t\n\r"


class BatchUnreadable(ValueError):
    """The body is not JSON."""


class NotABatch(ValueError):
    """The body is JSON, but not an array of events."""


def parse_batch(body: bytes) -> tuple[list[Any], list[int] | None]:
    """The events of a batch and, for bodies longer than one event may be, the byte
    size of each event's text (None when the whole body is within the limit)."""
    if len(body) <= MAX_EVENT_BYTES:
        events = _loads(body)
        if not isinstance(events, list):
            raise NotABatch("the body must be a JSON array of events")
        return events, None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BatchUnreadable(f"the body is not UTF-8: {error}") from None
    return _events_with_sizes(text)


def _loads(body: bytes) -> Any:
    try:
        return strict_json.loads(body)
    except strict_json.InvalidJson as error:
        raise BatchUnreadable(f"the body is not valid JSON: {error}") from None


def _skip_whitespace(text: str, index: int) -> int:
    while index < len(text) and text[index] in WHITESPACE:
        index += 1
    return index


def _events_with_sizes(text: str) -> tuple[list[Any], list[int]]:
    """Walk the array element by element, keeping each element's span."""
    index = _skip_whitespace(text, 0)
    if not text.startswith("[", index):
        _loads(text.encode())  # a body that is not JSON at all is unreadable, not "not a batch"
        raise NotABatch("the body must be a JSON array of events")
    index = _skip_whitespace(text, index + 1)
    events: list[Any] = []
    sizes: list[int] = []
    if text.startswith("]", index):
        index += 1
    else:
        while True:
            try:
                event, end = strict_json.raw_decode(text, index)
            except strict_json.InvalidJson as error:
                raise BatchUnreadable(f"the body is not valid JSON: {error}") from None
            events.append(event)
            # A character is 1 to 4 bytes: count bytes only when it could matter.
            span = end - index
            sizes.append(len(text[index:end].encode()) if span * 4 > MAX_EVENT_BYTES else span)
            index = _skip_whitespace(text, end)
            if text.startswith(",", index):
                index = _skip_whitespace(text, index + 1)
            elif text.startswith("]", index):
                index += 1
                break
            else:
                raise BatchUnreadable(f"the body is not valid JSON: expected ',' or ']' at "
                                      f"character {index}")
    if _skip_whitespace(text, index) != len(text):
        raise BatchUnreadable(f"the body is not valid JSON: extra data at character {index}")
    return events, sizes


def dumps(event: Any) -> bytes:
    """The stored form of an event: compact JSON, keys in the producer's order."""
    try:
        return orjson.dumps(event)
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()
