"""An event type's partitions read through all its timelines, in positions
(``app.domain.timeline``): the available range, single reads, and a stream
reader that reads each closed timeline to its end and goes on in the next.

Nothing here opens a reader on the topic of a cleaned-up timeline: its topic is
being removed, and librdkafka crashes a process that fetches from a topic as it
is deleted (README, known issues).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.domain.timeline import Timeline, Timelines
from app.storage.engine import (
    EventRun,
    PartitionBounds,
    StorageEngine,
    StoredEvent,
    StreamReader,
)

EngineFor = Callable[[str], StorageEngine]

CLOSED_POLL_S = 0.5
"""Longest wait for events of a closed timeline: they are all there already."""


@dataclass(frozen=True)
class SwitchWatch:
    """How readers of an event type keep from their clients the events a publish
    appended to the active timeline after a switch had read its ends (the publish
    moves them to the new timeline: ``app.publishing.late_appends``). Sent, they
    would take positions of the new timeline's first events, which a stream would
    then skip; as a newest offset, a stream from there would skip them too.

    ``reading()``, called as a read of the active timeline begins (before the reader
    takes up the cached timelines), gives a callable that says after the read whether
    it may have overlapped a switch (``PublishingGate.reading``); ``current`` gives
    the newest cached timelines, ``recorded_end`` a timeline's end in the database."""

    reading: Callable[[], Callable[[], bool]]
    recorded_end: Callable[[Timeline], tuple[int, ...] | None]
    current: Callable[[], Timelines | None]

    def active_end(self, timelines: Timelines, unsettled: Callable[[], bool]
                   ) -> tuple[int, ...] | None:
        """The end recorded for the active timeline of ``timelines``, read just now, if
        a switch closed it: as the newest cached timelines show it, or when the read
        may have overlapped a switch (``unsettled``), as the database has it."""
        active = timelines.active
        newest = self.current()
        if newest is not None:
            for timeline in newest.items:
                if timeline.id == active.id and timeline.last_offsets is not None:
                    return timeline.last_offsets
        return self.recorded_end(active) if unsettled() else None


NO_WATCH = SwitchWatch(lambda: lambda: False, lambda _timeline: None, lambda: None)
"""For readers that need none: no switch ever runs while they read."""


def timelines_bounds(engine_for: EngineFor, timelines: Timelines,
                     watch: SwitchWatch = NO_WATCH) -> list[PartitionBounds]:
    """The oldest and newest available position of every partition, over all timelines.
    An empty partition has ``newest == oldest - 1``, as for one topic. With ``watch``,
    the newest is never past the end a switch recorded for the active timeline."""
    active_index = len(timelines.items) - 1
    active = timelines.active
    unsettled = watch.reading()
    # Asked once: an answer can cost a kafka consumer and a fetch of every partition.
    active_bounds = _within_end(engine_for(active.storage_id).bounds(active.topic),
                                watch.active_end(timelines, unsettled))
    newest: dict[int, int] = {}
    for available in active_bounds:
        newest[available.partition] = (timelines.start_of(active_index, available.partition)
                                       + available.newest)
    oldest: dict[int, int] = {}
    for index, timeline in enumerate(timelines.items):
        pending = [p for p in range(timelines.partitions) if p not in oldest]
        if timeline.cleaned_up or not pending:
            continue
        last = timeline.last_offsets
        if last is not None and all(last[p] < 0 for p in pending):
            continue  # nothing was ever stored in them: no need to ask the storage
        answer = active_bounds if index == active_index else \
            engine_for(timeline.storage_id).bounds(timeline.topic)
        for available in answer:
            p = available.partition
            end = available.newest if last is None else min(available.newest, last[p])
            if p in pending and available.oldest <= end:
                oldest[p] = timelines.start_of(index, p) + available.oldest
    return [PartitionBounds(p, oldest.get(p, newest[p] + 1), newest[p])
            for p in range(timelines.partitions)]


def _within_end(bounds: list[PartitionBounds], end: tuple[int, ...] | None
                ) -> list[PartitionBounds]:
    if end is None:
        return bounds
    return [PartitionBounds(b.partition, min(b.oldest, end[b.partition] + 1),
                            min(b.newest, end[b.partition])) for b in bounds]


def timelines_newest_at_least(engine_for: EngineFor, timelines: Timelines,
                              watch: SwitchWatch = NO_WATCH) -> dict[int, int]:
    """Per partition, a position never past its newest, as cheaply as the active
    timeline's storage gives one (``StorageEngine.newest_at_least``); with ``watch``,
    never past the end a switch recorded for the active timeline."""
    active_index = len(timelines.items) - 1
    active = timelines.active
    unsettled = watch.reading()
    found = engine_for(active.storage_id).newest_at_least(active.topic)
    end = watch.active_end(timelines, unsettled)
    return {partition: timelines.start_of(active_index, partition)
            + (newest if end is None else min(newest, end[partition]))
            for partition, newest in found.items()}


def read_after(engine_for: EngineFor, timelines: Timelines, partition: int, after: int,
               limit: int) -> list[StoredEvent]:
    """Up to ``limit`` events after a position, from the timeline that holds the next one."""
    index, engine_after = timelines.locate(partition, after)
    timeline = timelines.items[index]
    if timeline.cleaned_up:
        return []
    start = timelines.start_of(index, partition)
    end = timelines.end_of(index, partition)
    events = engine_for(timeline.storage_id).read(timeline.topic, partition, engine_after, limit)
    return [StoredEvent(partition, start + e.offset, e.payload) for e in events
            if end is None or start + e.offset <= end]


class TimelinesReader:
    """A ``StreamReader`` in positions over all timelines of an event type.

    ``watch.current`` gives the newest known timelines (the event type cache); the
    reader looks at it on every poll, so a switch is followed within a poll (never
    with ``NO_WATCH``)."""

    def __init__(self, engine_for: EngineFor, timelines: Timelines,
                 positions: Mapping[int, int], watch: SwitchWatch = NO_WATCH) -> None:
        self._engine_for = engine_for
        self._timelines = timelines
        self._watch = watch
        self._positions = dict(positions)
        self._placed: dict[int, int] = {}  # partition -> index of the timeline read
        self._readers: dict[int, StreamReader] = {}  # index of the timeline -> its reader
        self._place()

    def follow(self) -> None:
        """Take up newer timelines: partitions at the end of a closed one move on, and
        the readers of cleaned-up ones close. ``poll`` does it first; a caller that
        stops polling for a while calls it now and then."""
        newer = self._watch.current()
        if newer is not None and newer is not self._timelines and newer != self._timelines:
            self._timelines = newer
            self._place()

    def poll(self, max_events: int, timeout: float) -> list[EventRun]:
        unsettled = self._watch.reading()
        self.follow()
        active_index = len(self._timelines.items) - 1
        closed = sorted(index for index in self._readers if index != active_index)
        if closed:
            index = closed[0]
            events = self._readers[index].poll(max_events, min(timeout, CLOSED_POLL_S))
            taken = self._take(index, events)
            if not events:
                self._skip_missing(index)
            return taken
        if active_index in self._readers:
            runs = self._readers[active_index].poll(max_events, timeout)
            if runs:
                runs = self._within_recorded_end(runs, unsettled)
            return self._take(active_index, runs)
        return []

    def close(self) -> None:
        readers, self._readers = self._readers, {}
        for reader in readers.values():
            reader.close()

    def _within_recorded_end(self, runs: list[EventRun], unsettled: Callable[[], bool]
                             ) -> list[EventRun]:
        """The runs of the active timeline without the events past the end a switch
        recorded for it, if one did. The partitions that reach that end wait there
        until ``follow`` takes up the next timeline."""
        end = self._watch.active_end(self._timelines, unsettled)
        if end is None:
            return runs
        return [EventRun(run.partition, run.first,
                         run.payloads[:end[run.partition] - run.first + 1])
                for run in runs if run.first <= end[run.partition]]

    def _take(self, index: int, runs: list[EventRun]) -> list[EventRun]:
        """The runs in positions; partitions that reached the end of a closed timeline
        move on to the next. Readers give each partition's events in offset order."""
        timelines = self._timelines
        taken: list[EventRun] = []
        done = False
        for run in runs:
            p = run.partition
            if self._placed.get(p) != index:
                continue  # not read in this timeline
            start, end = timelines.start_of(index, p), timelines.end_of(index, p)
            first, last = start + run.first, start + run.last
            if start == 0 and end is None and first > self._positions[p]:
                # The usual run: the open timeline, where offsets are positions, read on
                # from where it was. It serves as it is.
                taken.append(run)
                self._positions[p] = last
                continue
            # Leave out what was taken before and what lies past the timeline's end.
            low = max(first, self._positions[p] + 1)
            high = last if end is None else min(last, end)
            if low > high:
                continue
            taken.append(EventRun(p, low, run.payloads[low - first:high - first + 1]))
            self._positions[p] = high
            done = done or high == end
        if done:
            self._place()
        return taken

    def _skip_missing(self, index: int) -> None:
        """Move on from a closed timeline whose remaining events are gone (retention)."""
        timelines = self._timelines
        timeline = timelines.items[index]
        moved = False
        for available in self._engine_for(timeline.storage_id).bounds(timeline.topic):
            p = available.partition
            end = timelines.end_of(index, p)
            if self._placed.get(p) != index or end is None:
                continue
            start = timelines.start_of(index, p)
            if min(available.newest, end - start) <= self._positions[p] - start \
                    or available.oldest > end - start:
                self._positions[p] = end
                moved = True
        if moved:
            self._place()

    def _place(self) -> None:
        """Read each partition in the timeline that holds its next event, reopening
        the readers whose partitions changed."""
        timelines = self._timelines
        placed: dict[int, int] = {}
        for p, position in self._positions.items():
            index, _ = timelines.locate(p, position)
            while timelines.items[index].cleaned_up:  # its events are gone: skip them
                end = timelines.end_of(index, p)
                assert end is not None, "only closed timelines are cleaned up"
                position = self._positions[p] = end
                index, _ = timelines.locate(p, position)
            placed[p] = index
        before = self._placed
        changed = {i for i in set(before.values()) | set(placed.values())
                   if {p for p, at in before.items() if at == i}
                   != {p for p, at in placed.items() if at == i}}
        self._placed = placed
        for index in changed:
            reader = self._readers.pop(index, None)
            if reader is not None:
                reader.close()
            positions = {p: timelines.locate(p, self._positions[p])[1]
                         for p, at in placed.items() if at == index}
            if positions:
                timeline = timelines.items[index]
                self._readers[index] = self._engine_for(timeline.storage_id).reader(
                    timeline.topic, positions)
