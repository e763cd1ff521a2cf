"""Subscription cursors as clients send them, checked against the subscription.

``{"event_type": "e", "partition": "0", "offset": "001-0001-000000000000000042",
"cursor_token": "..."}``: the token is required on commits and opaque (any
string); the event type must be one of the subscription's, the partition one
of its partitions, the offset one this broker issued for its timeline.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from app.cursors import CursorInvalid, partition_number, position_of, resolve
from app.domain.timeline import Timelines
from app.domain.topology import PartitionKey
from app.storage.engine import PartitionBounds
from app.subscriptions.partitions import SubscriptionPartitions

Bounds = Mapping[str, Mapping[int, PartitionBounds]]

_UUID4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)


def cursor_tokens() -> Iterator[str]:
    """Tokens for the lines of one stream: version-4 UUIDs that share a random first
    part and count up in the last 48 bits from a random start, so each is distinct
    and still opaque, for ~0.2 us each instead of ``new_cursor_token``'s 0.6."""
    shared = new_cursor_token()[:24]
    for number in itertools.count(random.getrandbits(48)):
        yield f"{shared}{number & 0xFFFF_FFFF_FFFF:012x}"


def new_cursor_token() -> str:
    """A random version-4 UUID, as Nakadi's tokens are. A subscription stream makes one
    per batch line: ``uuid.uuid4()`` (a system call for the bytes, a UUID object) cost
    2.0 us, this 0.6 us. The token is opaque and guards nothing, so the process's
    pseudo-random generator (reseeded in each forked worker) will do."""
    digits = f"{random.getrandbits(128) & _UUID4_CLEAR | _UUID4_SET:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


@dataclass(frozen=True)
class CheckedCursor:
    """A valid cursor: its partition, the offset to store, and the cursor as sent."""

    key: PartitionKey
    offset: str
    sent: Mapping[str, Any]


def _describe(cursor: Mapping[str, Any]) -> str:
    return (f"cursor {{event_type: {cursor.get('event_type')!r}, partition: "
            f"{cursor.get('partition')!r}, offset: {cursor.get('offset')!r}}}")


def _shape(cursor: Any, with_token: bool) -> tuple[str, str, str]:
    if not isinstance(cursor, Mapping):
        raise CursorInvalid(f"cursor {cursor!r} must be an object with event_type, partition, "
                            "offset" + (" and cursor_token" if with_token else ""))
    fields = ("event_type", "partition", "offset") + (("cursor_token",) if with_token else ())
    wrong = [name for name in fields if not isinstance(cursor.get(name), str)]
    if wrong:
        raise CursorInvalid(f"{_describe(cursor)} needs string fields {', '.join(wrong)}")
    return cursor["event_type"], cursor["partition"], cursor["offset"]


def cursor_items(body: Any) -> list:
    """The ``items`` array of a cursors body."""
    if not isinstance(body, Mapping) or not isinstance(body.get("items"), list):
        raise CursorInvalid('the body must be an object {"items": [cursors]}')
    return body["items"]


def checked_commit(cursor: Any, partitions: SubscriptionPartitions,
                   newest_of: Callable[[Timelines, int, int], int]) -> CheckedCursor:
    """A cursor to commit: one the subscription could have sent (not past the
    partition's newest event; an expired one is still accepted). ``newest_of`` gives a
    partition's newest position, or any position at least as far as the one asked about."""
    event_type, partition, offset = _shape(cursor, with_token=True)
    timeline = _timeline(event_type, partitions, cursor)
    number = partition_number(partition, timeline, cursor)
    position = position_of(offset, number, timeline, cursor)
    newest = newest_of(timeline, number, position)
    if position > newest:
        raise CursorInvalid(f"{_describe(cursor)}: the offset is past the newest event of the "
                            f"partition, {timeline.encode(number, newest)}")
    return CheckedCursor((event_type, str(number)), timeline.encode(number, position), cursor)


def checked_reset(cursor: Any, partitions: SubscriptionPartitions, bounds: Bounds
                  ) -> CheckedCursor:
    """A cursor to reset to: within the available events (``begin`` allowed)."""
    event_type, _, _ = _shape(cursor, with_token=False)
    timeline = _timeline(event_type, partitions, cursor)
    position = resolve(cursor, timeline, bounds[event_type])
    return CheckedCursor((event_type, str(position.partition)),
                         timeline.encode(position.partition, position.offset), cursor)


def _timeline(event_type: str, partitions: SubscriptionPartitions, cursor: Mapping[str, Any]
              ) -> Timelines:
    if event_type not in partitions.timelines:
        raise CursorInvalid(f"{_describe(cursor)}: event type {event_type!r} is not part of "
                            f"this subscription ({', '.join(sorted(partitions.timelines))})")
    return partitions.timelines[event_type]
