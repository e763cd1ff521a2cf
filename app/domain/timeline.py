"""Timelines: the periods in which an event type's events live in one storage topic.

An event type starts with one timeline; each timeline switch closes the active
one (recording the newest engine offset of each partition) and opens the next,
usually in another storage. Above the storage, a partition is one sequence of
*positions* that runs through all its timelines without gaps: the events of
timeline 1, then those of timeline 2, and so on. Streams, subscriptions and
the cursor arithmetic count in positions; ``Timelines`` turns a position into
the client's offset string (timeline order and engine offset, 001's cursor
format) and back, and says which timeline and engine offset a position is in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.storage.offsets import InvalidOffset, decode_offset, encode_offset


@dataclass(frozen=True)
class Timeline:
    id: str
    event_type: str
    order: int
    storage_id: str
    topic: str
    partitions: int
    # Once closed: the newest engine offset of each partition (-1: none ever stored).
    last_offsets: tuple[int, ...] | None = None
    # Its topic was removed after its retention ended: it holds no events any more.
    cleaned_up: bool = False

    @property
    def closed(self) -> bool:
        return self.last_offsets is not None


class OffsetUnknown(ValueError):
    """An offset string that names no event of the event type: the message says why."""


@dataclass(frozen=True)
class Timelines:
    """Every timeline of one event type, oldest first; the last one is active."""

    items: tuple[Timeline, ...]
    # For each timeline, per partition: the position of its engine offset 0.
    _starts: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.items or any(t.last_offsets is None for t in self.items[:-1]):
            raise ValueError("timelines need an active timeline and closed ones before it")
        partitions = self.items[-1].partitions
        starts, start = [], [0] * partitions
        for timeline in self.items:
            starts.append(tuple(start))
            if timeline.last_offsets is not None:
                start = [s + last + 1 for s, last in zip(start, timeline.last_offsets,
                                                           strict=True)]
        object.__setattr__(self, "_starts", tuple(starts))

    @property
    def active(self) -> Timeline:
        return self.items[-1]

    @property
    def event_type(self) -> str:
        return self.active.event_type

    @property
    def partitions(self) -> int:
        return self.active.partitions

    def start_of(self, index: int, partition: int) -> int:
        """The position of engine offset 0 of the ``index``-th timeline's partition."""
        return self._starts[index][partition]

    def end_of(self, index: int, partition: int) -> int | None:
        """The position of the last event of a closed timeline's partition (None: active)."""
        last = self.items[index].last_offsets
        return None if last is None else self._starts[index][partition] + last[partition]

    def locate(self, partition: int, after: int) -> tuple[int, int]:
        """(index of the timeline, engine offset) of reading after ``after``: the
        timeline holding the next event, and the engine offset to read after there."""
        for index in range(len(self.items)):
            end = self.end_of(index, partition)
            if end is None or after < end:
                return index, after - self._starts[index][partition]
        raise AssertionError("the active timeline has no end")

    def encode(self, partition: int, position: int) -> str:
        """The client offset of a position: in the timeline holding its event."""
        for index, timeline in enumerate(self.items):
            end = self.end_of(index, partition)
            if end is None or position <= end:
                return encode_offset(timeline.order, position - self._starts[index][partition])
        raise AssertionError("the active timeline has no end")

    def decode(self, partition: int, offset: str) -> int:
        """The position of a client offset of any of the timelines."""
        try:
            order, engine_offset = decode_offset(offset)
        except InvalidOffset as error:
            raise OffsetUnknown(str(error)) from None
        for index, timeline in enumerate(self.items):
            if timeline.order != order:
                continue
            last = timeline.last_offsets
            if last is not None and engine_offset > last[partition]:
                raise OffsetUnknown(
                    f"offset {offset!r} is past the end of timeline {order}, whose last "
                    f"offset in partition {partition} is "
                    f"{encode_offset(order, last[partition])}")
            return self._starts[index][partition] + engine_offset
        raise OffsetUnknown(f"the offset belongs to timeline {order}, which this event type "
                            "does not have")
