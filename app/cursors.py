"""Cursors as clients send and receive them, checked against an event type's partitions.

A client cursor is ``{"partition": "0", "offset": "001-0001-000000000000000042"}``;
``begin`` (any case) as the offset means before the oldest available event.
Resolved, it is a ``Position``: a partition number and the engine offset after
which reading starts (``-1`` before the first event ever stored).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from app.domain.cursor import Position
from app.domain.timeline import Timeline
from app.storage.engine import PartitionBounds
from app.storage.offsets import InvalidOffset, decode_offset, encode_offset

BEGIN = "begin"
PARTITION_NAME = re.compile(r"^(0|[1-9][0-9]{0,8})$")


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
    return (isinstance(name, str) and PARTITION_NAME.match(name) is not None
            and int(name) < partitions)


def partition_number(partition: str, timeline: Timeline, cursor: Any = None) -> int:
    """The number of a partition name, which must exist in the timeline."""
    if not is_partition(partition, timeline.partitions):
        what = describe(cursor) if cursor is not None else f"partition {partition!r}"
        raise CursorInvalid(f"{what}: partition {partition!r} does not exist; this event type "
                            f"has partitions \"0\" to \"{timeline.partitions - 1}\"")
    return int(partition)


def engine_offset(offset: str, timeline: Timeline, cursor: Any) -> int:
    """The engine offset of a client offset string of the timeline (not ``begin``)."""
    try:
        order, position = decode_offset(offset)
    except InvalidOffset as error:
        raise CursorInvalid(f"{describe(cursor)}: {error}") from None
    if order != timeline.order:
        raise CursorInvalid(f"{describe(cursor)}: the offset belongs to timeline {order}, "
                            f"which this event type does not have")
    return position


def resolve(cursor: Any, timeline: Timeline,
            bounds: Mapping[int, PartitionBounds]) -> Position:
    """The position a cursor points at; it must lie within the available events
    (or just before the oldest one)."""
    partition_name, offset = check_shape(cursor)
    partition = partition_number(partition_name, timeline, cursor)
    available = bounds[partition]
    if offset.lower() == BEGIN:
        return Position(partition, available.oldest - 1)
    position = engine_offset(offset, timeline, cursor)
    if position < available.oldest - 1:
        raise CursorInvalid(f"{describe(cursor)}: the offset has expired; the oldest available "
                            f"event is at {encode_offset(timeline.order, available.oldest)}")
    if position > available.newest:
        raise CursorInvalid(f"{describe(cursor)}: the offset does not exist; the newest event "
                            f"is at {encode_offset(timeline.order, available.newest)}")
    return Position(partition, position)


def positions_by_partition(cursors: list, timeline: Timeline,
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


def client_cursor(timeline: Timeline, partition: int, offset: int) -> dict[str, str]:
    """The cursor a client sees for a position."""
    return {"partition": str(partition), "offset": encode_offset(timeline.order, offset)}
