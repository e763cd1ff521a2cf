"""Offset ranges of an event type's partitions: where they start and end, how
they split, and reading exactly one of them.

Offsets are opaque strings; every position is computed by the broker
(``shifted-cursors``, ``cursor-distances``, ``unconsumed_events``), so the
pipeline works with any broker's offsets. The only shortcut: the offsets of the
events inside a stream batch are derived from the batch's cursor when offsets
have Nakadi's ``VVV-TTTT-NNN…`` shape and the arithmetic checks out; otherwise
the broker is asked. Compacted event types have gaps (removed events keep their
offsets), so their ranges are read one event per stream line, whose cursor is
that event's own offset, up to the range's end offset.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from workers.pipeline.client import BrokerClient, BrokerError, Partition, StreamBatch

EARLIEST = "earliest"
LATEST = "latest"
NAKADI_OFFSET = re.compile(r"^(\d{3}-\d{4}-)(\d+|-1)$")


@dataclass(frozen=True)
class OffsetRange:
    """The ``count`` events of a partition after offset ``after`` up to and
    including offset ``until``. In a ``compacted`` event type ``count`` is the
    offsets' distance, the removed events included: an upper bound."""
    partition: str
    after: str
    until: str
    count: int
    compacted: bool = False


def parse_offsets(spec: str | None, default: str, what: str) -> dict[str, str] | str:
    """An offsets option: ``earliest``, ``latest``, or JSON naming partitions, as
    ``{"0": "001-0001-000000000000000041", "1": "earliest"}`` or as a list of
    cursors ``[{"partition": "0", "offset": "..."}]``."""
    text = (spec or default).strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    try:
        value = json.loads(text)
    except ValueError:
        raise BrokerError(f"{what} must be earliest, latest or JSON of per-partition "
                          f"offsets, not {text!r}") from None
    if isinstance(value, list):
        try:
            value = {str(c["partition"]): c["offset"] for c in value}
        except (TypeError, KeyError):
            raise BrokerError(f"{what}: every cursor needs a partition and an "
                              "offset") from None
    if not isinstance(value, dict) or not all(isinstance(o, str) for o in value.values()):
        raise BrokerError(f"{what} must map partitions to offset strings, as "
                          '{"0": "001-0001-000000000000000041"}')
    return {str(p): o for p, o in value.items()}


class OffsetPlanner:
    """Resolves offsets of one event type through the broker."""

    def __init__(self, client: BrokerClient, event_type: str, compacted: bool = False) -> None:
        self.client = client
        self.event_type = event_type
        self.compacted = compacted
        # The distances last asked for: a micro-batch's planning asks the same twice
        # (where it ends, then its ranges); offsets never move, so neither do they.
        self._last_distances: tuple[dict[str, str], dict[str, str], dict[str, int]] | None = None

    def partitions(self) -> list[Partition]:
        return self.client.partitions(self.event_type)

    def earliest(self, partitions: list[Partition]) -> dict[str, str]:
        """Per partition, the position just before its oldest available event."""
        counted = self.client.partitions(self.event_type,
                                         {p.partition: "BEGIN" for p in partitions})
        shifts = [(p.partition, p.newest_available_offset, -(p.unconsumed_events or 0))
                  for p in counted if p.unconsumed_events]
        result = {p.partition: p.newest_available_offset for p in counted}
        result.update(zip([p for p, _, _ in shifts],
                          self.client.shifted(self.event_type, shifts), strict=True))
        return result

    def resolve(self, spec: dict[str, str] | str, missing: str) -> dict[str, str]:
        """Concrete offsets of every partition for a parsed offsets option; a
        partition the option does not name takes ``missing``."""
        partitions = self.partitions()
        named = spec if isinstance(spec, dict) else {}
        unknown = set(named) - {p.partition for p in partitions}
        if unknown:
            raise BrokerError(f"event type {self.event_type!r} has no partition "
                              f"{', '.join(sorted(unknown))}")
        wanted = {p.partition: named.get(p.partition, spec if isinstance(spec, str)
                                         else missing) for p in partitions}
        earliest = self.earliest(partitions) if any(
            o.lower() in (EARLIEST, "begin") for o in wanted.values()) else {}
        newest = {p.partition: p.newest_available_offset for p in partitions}
        return {p: earliest[p] if o.lower() in (EARLIEST, "begin")
                else newest[p] if o.lower() == LATEST else o for p, o in wanted.items()}

    def distances(self, start: Mapping[str, str], end: Mapping[str, str]) -> dict[str, int]:
        """Events after ``start`` up to and including ``end``, per partition of both
        (none where both are the same offset, without asking the broker)."""
        start = {p: o for p, o in start.items() if p in end}
        end = {p: end[p] for p in start}
        if self._last_distances and self._last_distances[:2] == (start, end):
            return dict(self._last_distances[2])
        result = dict.fromkeys(start, 0)
        asked = [p for p in start if start[p] != end[p]]
        if asked:
            body = [{"initial_cursor": {"partition": p, "offset": start[p]},
                     "final_cursor": {"partition": p, "offset": end[p]}} for p in asked]
            answer = self.client.cursor_distances(self.event_type, body)
            result.update((p, item["distance"]) for p, item in zip(asked, answer, strict=True))
        self._last_distances = (start, end, dict(result))
        return result

    def ranges(self, start: Mapping[str, str], end: Mapping[str, str],
               split_size: int) -> list[OffsetRange]:
        """The non-empty ranges from ``start`` to ``end``, none longer than
        ``split_size`` events."""
        distances = self.distances(start, end)
        backwards = sorted(p for p, d in distances.items() if d < 0)
        if backwards:
            raise BrokerError(f"the ending offset of partition {backwards[0]} is before its "
                              "starting offset")
        pieces = {p: math.ceil(d / split_size) for p, d in distances.items() if d > 0}
        shifts = [(p, start[p], i * split_size) for p, n in pieces.items()
                  for i in range(1, n)]
        cuts = iter(self.client.shifted(self.event_type, shifts))
        result = []
        for p, n in pieces.items():
            bounds = [start[p], *(next(cuts) for _ in range(n - 1)), end[p]]
            for i in range(n):
                count = min(split_size, distances[p] - i * split_size)
                result.append(OffsetRange(p, bounds[i], bounds[i + 1], count, self.compacted))
        return result

    def advance(self, start: Mapping[str, str], max_events: int | None,
                cap: Mapping[str, str] | None = None) -> dict[str, str]:
        """Where the next micro-batch ends: the newest offsets (or ``cap``), taking at
        most ``max_events`` events over all partitions, shared fairly among them.
        Up to ``cap`` only its distances are asked, none once ``start`` is there."""
        if cap is not None:
            known = [p for p in start if p in cap]
            behind = self.distances({p: start[p] for p in known}, cap)
            available = {p: max(0, behind[p]) for p in known}
            ends = {p: cap[p] for p in known}
        else:
            counted = {p.partition: p
                       for p in self.client.partitions(self.event_type, dict(start))}
            known = [p for p in start if p in counted]
            available = {p: counted[p].unconsumed_events or 0 for p in known}
            ends = {p: counted[p].newest_available_offset for p in known}
        result = dict(start)
        shifts = []
        for p, n in share(available, max_events).items():
            if n and n == available[p]:
                result[p] = ends[p]
            elif n:
                shifts.append((p, start[p], n))
        result.update(zip([p for p, _, _ in shifts],
                          self.client.shifted(self.event_type, shifts), strict=True))
        return result


def share(available: Mapping[str, int], budget: int | None) -> dict[str, int]:
    """How many of its available events each partition gets from the budget: the
    smallest backlogs are served whole, the rest split the remainder evenly."""
    if budget is None:
        return dict(available)
    take = {}
    remaining = budget
    ordered = sorted(available.items(), key=lambda item: (item[1], item[0]))
    for index, (p, count) in enumerate(ordered):
        take[p] = min(count, remaining // (len(ordered) - index))
        remaining -= take[p]
    return take


def following_offsets(after: str, last: str, count: int) -> pa.StringArray | None:
    """The ``count`` offsets after ``after`` up to ``last`` by arithmetic, when both
    have Nakadi's shape in one timeline and are ``count`` apart; else None."""
    a, b = NAKADI_OFFSET.match(after), NAKADI_OFFSET.match(last)
    if a is None or b is None or a[1] != b[1]:
        return None
    first, end = int(a[2]), int(b[2])
    if end - first != count:
        return None
    numbers = pc.cast(pa.array(range(first + 1, end + 1), pa.int64()), pa.string())
    return pc.binary_join_element_wise(b[1], pc.utf8_lpad(numbers, len(b[2]), "0"), "")


def read_range(client: BrokerClient, event_type: str, span: OffsetRange,
               batch_limit: int = 1000, exact: bool = False,
               decode: Callable[[bytes], StreamBatch | None] | None = None,
               ) -> Iterator[tuple[pa.StringArray, Sequence[dict[str, Any]] | pa.RecordBatch]]:
    """The events of the range with their offsets, in order, in the broker's
    batches (as ``client.stream`` gives them). A stream that ends early is
    reopened after the last event received; a range the broker cannot fill is an
    error, never a silent gap."""
    if span.compacted:
        yield from _read_compacted(client, event_type, span, exact, decode)
        return
    after, remaining = span.after, span.count
    while remaining > 0:
        received = 0
        for batch in client.stream(event_type, span.partition, after, remaining, batch_limit,
                                   exact, decode):
            events = batch.events
            if len(events) > remaining:
                raise BrokerError(f"the broker sent more events of partition {span.partition} "
                                  f"of {event_type!r} than its stream_limit allows")
            offsets = following_offsets(after, batch.offset, len(events))
            if offsets is None:
                offsets = pa.array(client.shifted(event_type, [
                    (span.partition, after, n) for n in range(1, len(events) + 1)]), pa.string())
            yield offsets, events
            after = offsets[-1].as_py()
            remaining, received = remaining - len(events), received + 1
            if remaining == 0:
                break
        if remaining and not received:
            raise BrokerError(f"partition {span.partition} of {event_type!r} ended {remaining} "
                              f"events before offset {span.until}; were they removed by "
                              "retention?")
    if after != span.until:
        raise BrokerError(f"partition {span.partition} of {event_type!r}: read up to offset "
                          f"{after}, expected {span.until}")


def _read_compacted(client: BrokerClient, event_type: str, span: OffsetRange, exact: bool,
                    decode: Callable[[bytes], StreamBatch | None] | None,
                    ) -> Iterator[tuple[pa.StringArray, Sequence[dict[str, Any]] | pa.RecordBatch]]:
    """A range of a compacted event type: the events that stay, each with its own
    offset. The offsets of the events inside a line cannot be told from its cursor
    (removed events leave gaps), so lines hold one event; ``span.count`` counts the
    removed offsets too, so the range ends at ``until``, or before the first event
    after it when compaction removed the event at ``until``."""
    after = span.after
    while after != span.until:
        received = 0
        for batch in client.stream(event_type, span.partition, after, span.count, 1, exact,
                                   decode):
            if len(batch.events) != 1:
                raise BrokerError(f"the broker sent {len(batch.events)} events in a line of "
                                  f"partition {span.partition} of {event_type!r} asked with "
                                  "batch_limit 1")
            received += 1
            if batch.offset != span.until and offset_after(client, event_type, span.partition,
                                                           batch.offset, span.until):
                return
            yield pa.array([batch.offset], pa.string()), batch.events
            after = batch.offset
            if after == span.until:
                return
        if not received:
            raise BrokerError(f"partition {span.partition} of {event_type!r} ended before "
                              f"offset {span.until} (read up to {after}); were its events "
                              "removed by retention?")


def offset_after(client: BrokerClient, event_type: str, partition: str, offset: str,
                 other: str) -> bool:
    """Whether ``offset`` comes after ``other`` in the partition: compared directly
    when both have Nakadi's shape, else by the broker's cursor distance."""
    a, b = NAKADI_OFFSET.match(offset), NAKADI_OFFSET.match(other)
    if a is not None and b is not None:
        return (a[1], int(a[2])) > (b[1], int(b[2]))
    [answer] = client.cursor_distances(event_type, [
        {"initial_cursor": {"partition": partition, "offset": other},
         "final_cursor": {"partition": partition, "offset": offset}}])
    return int(answer["distance"]) > 0
