"""Reading a published batch: the JSON array of events, and each event's size
as it appeared in the request (the spec counts whitespace towards the limit)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from app import strict_json

MAX_EVENT_BYTES = 999_000
WHITESPACE = " \t\n\r"


MAX_STORED_NESTING = 254
"""How deeply an event may nest arrays and objects: as deeply as orjson writes. Bodies
are read up to about 1,000 levels (``strict_json``), so deeper events fail at publishing."""
TOO_DEEP = (f"the event nests arrays and objects more than {MAX_STORED_NESTING} levels deep, "
            "more than the broker stores")


class EventTooDeep(ValueError):
    """An event (or a value in it) nests deeper than ``MAX_STORED_NESTING``."""


class BatchUnreadable(ValueError):
    """The body is not JSON."""


class NotABatch(ValueError):
    """The body is JSON, but not an array of events."""


class TooManyEvents(ValueError):
    """The batch holds more events than one request may."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the batch holds more than {limit} events; send at most {limit} "
                         "in one request")


def parse_batch(body: bytes, max_events: int) -> tuple[list[Any], list[int] | None]:
    """The events of a batch and, for bodies longer than one event may be, the byte
    size of each event's text (None when the whole body is within the limit). Past
    ``max_events`` events, ``TooManyEvents`` (a long body is not read further)."""
    if len(body) <= MAX_EVENT_BYTES:
        events = _loads(body)
        if not isinstance(events, list):
            raise NotABatch("the body must be a JSON array of events")
        if len(events) > max_events:
            raise TooManyEvents(max_events)
        return events, None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BatchUnreadable(f"the body is not UTF-8: {error}") from None
    return _events_with_sizes(text, max_events)


def _loads(body: bytes) -> Any:
    try:
        return strict_json.loads(body)
    except strict_json.InvalidJson as error:
        raise BatchUnreadable(f"the body is not valid JSON: {error}") from None


def _skip_whitespace(text: str, index: int) -> int:
    while index < len(text) and text[index] in WHITESPACE:
        index += 1
    return index


def _events_with_sizes(text: str, max_events: int) -> tuple[list[Any], list[int]]:
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
            if len(events) == max_events:
                raise TooManyEvents(max_events)
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


def dumps(value: Any, sort_keys: bool = False) -> bytes:
    """Compact JSON of an event (its stored form) or of a value in it, keys in the
    producer's order or sorted. Raises ``EventTooDeep`` past ``MAX_STORED_NESTING``."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except orjson.JSONEncodeError as error:
        if "ecursion" in str(error):
            raise EventTooDeep(TOO_DEEP) from None
    # An integer beyond 64 bits, which orjson does not write; the standard library would
    # write deeper values than orjson, but events are held to one limit.
    if strict_json.nesting(value, MAX_STORED_NESTING) > MAX_STORED_NESTING:
        raise EventTooDeep(TOO_DEEP)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                      sort_keys=sort_keys).encode()
