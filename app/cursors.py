"""Cursors as clients send and receive them, checked against an event type's partitions.

A client cursor is ``{"partition": "0", "offset": "001-0001-000000000000000042"}``;
``begin`` (any case) as the offset means before the oldest available event.
Resolved, it is a ``Position``: a partition number and the position (across the
event type's timelines, ``app.domain.timeline``) after which reading starts
(``-1`` before the first event ever stored). Offsets of every timeline of the
event type are accepted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from app.domain.cursor import Position
from app.domain.timeline import OffsetUnknown, Timelines
from app.storage.engine import PartitionBounds

BEGIN = "begin"
PARTITION_NAME = re.compile(r"0|[1-9][0-9]{0,8}")


class CursorInvalid(ValueError):
    """A cursor that cannot be used; the message names it and says why (a 422)."""


def describe(cursor: Any) -> str:
    """How a cursor is named in error messages."""
    if isinstance(cursor, Mapping):
        partition, offset = cursor.get("partition"), cursor.get("offset")
        return f"cursor {{partition: {partition!r}, offset: {offset!r}}}"
    return f"cursor {cursor!r}"


def check_shape(cursor: Any) -> tuple[str, str]:
    """The partition and offset strings of a cursor object."""
    if not isinstance(cursor, Mapping):
        raise CursorInvalid(f"{describe(cursor)} must be an object with partition and offset")
    partition, offset = cursor.get("partition"), cursor.get("offset")
    if not isinstance(partition, str) or not isinstance(offset, str):
        raise CursorInvalid(f"{describe(cursor)} needs string fields partition and offset")
    return partition, offset


def is_partition(name: Any, partitions: int) -> bool:
    """Whether ``name`` names one of ``partitions`` partitions: "0", "1", ..."""
    return (isinstance(name, str) and PARTITION_NAME.fullmatch(name) is not None
            and int(name) < partitions)


def partition_number(partition: str, timeline: Timelines, cursor: Any = None) -> int:
    """The number of a partition name, which must exist in the timeline."""
    if not is_partition(partition, timeline.partitions):
        what = describe(cursor) if cursor is not None else f"partition {partition!r}"
        raise CursorInvalid(f"{what}: partition {partition!r} does not exist; this event type "
                            f"has partitions \"0\" to \"{timeline.partitions - 1}\"")
    return int(partition)


def position_of(offset: str, partition: int, timelines: Timelines, cursor: Any) -> int:
    """The position of a client offset string (not ``begin``) in a partition."""
    try:
        return timelines.decode(partition, offset)
    except OffsetUnknown as error:
        raise CursorInvalid(f"{describe(cursor)}: {error}") from None


def resolve(cursor: Any, timeline: Timelines,
            bounds: Mapping[int, PartitionBounds]) -> Position:
    """The position a cursor points at; it must lie within the available events
    (or just before the oldest one)."""
    partition_name, offset = check_shape(cursor)
    partition = partition_number(partition_name, timeline, cursor)
    available = bounds[partition]
    if offset.lower() == BEGIN:
        return Position(partition, available.oldest - 1)
    position = position_of(offset, partition, timeline, cursor)
    if position < available.oldest - 1:
        raise CursorInvalid(f"{describe(cursor)}: the offset has expired; the oldest available "
                            f"event is at {timeline.encode(partition, available.oldest)}")
    if position > available.newest:
        raise CursorInvalid(f"{describe(cursor)}: the offset does not exist; the newest event "
                            f"is at {timeline.encode(partition, available.newest)}")
    return Position(partition, position)


def positions_by_partition(cursors: list, timeline: Timelines,
                           bounds: Mapping[int, PartitionBounds]) -> dict[int, int]:
    """The engine offset each cursor points at, by partition; at most one cursor
    per partition."""
    positions: dict[int, int] = {}
    for cursor in cursors:
        position = resolve(cursor, timeline, bounds)
        if position.partition in positions:
            raise CursorInvalid(f"partition \"{position.partition}\" has more than one cursor; "
                                "give at most one per partition")
        positions[position.partition] = position.offset
    return positions


def client_cursor(timeline: Timelines, partition: int, offset: int) -> dict[str, str]:
    """The cursor a client sees for a position."""
    return {"partition": str(partition), "offset": timeline.encode(partition, offset)}
