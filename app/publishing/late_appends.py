"""Appends that a timeline switch may have missed.

A switch waits for the publishes in flight of every process it sees in ZooKeeper
(``app.coordination.timeline_switch``). A process it cannot see (its session
lost, or ZooKeeper not reached yet) publishes on meanwhile, as publishing does
without ZooKeeper. Should a switch read the old timeline's ends before such a
process's append landed, the appended events lie past the recorded end, where
no reader looks. So a publish that overlapped such a time asks, once its append
is done, for the recorded end of the timeline it appended to (waiting for a
switch that is reading the ends: ``recorded_end``), and appends the events past
that end again, to the active timeline, in the same partitions. Readers then
find them after the events published to the new timeline meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from app.domain.timeline import Timeline
from app.publishing.publisher import Append, AppendResults
from app.services import Services
from app.storage.engine import Keys, StorageError

MAX_MOVES = 3
"""How many switches in a row a publish follows before it gives up (a 207 that fails
the events it could not place)."""

log = logging.getLogger(__name__)


def checked_append(services: Services, timeline: Timeline,
                   missed_switch: Callable[[], bool]) -> Append:
    """The engine's append to ``timeline``; when ``missed_switch()`` says, after the
    append, that a switch may have gone on without waiting for it, the events found
    past the timeline's recorded end are appended to the active timeline."""
    def append(batches: Mapping[int, Sequence[bytes]], keys: Keys | None) -> AppendResults:
        results = services.engines.get(timeline.storage_id).append_many(timeline.topic,
                                                                         batches, keys)
        if missed_switch():
            _move_late_events(services, timeline, batches, keys, results)
        return results
    return append


def _move_late_events(services: Services, timeline: Timeline,
                      batches: Mapping[int, Sequence[bytes]], keys: Keys | None,
                      results: AppendResults) -> None:
    """Append the events stored past the end of their (closed) timeline again, to the
    active one, with their keys; ``results`` gets the error of a partition whose events
    could not be."""
    # Per partition: the payloads stored, their keys (None: not compacted), their offsets.
    stored: dict[int, tuple[list[bytes], list[bytes] | None, list[int]]] = {
        partition: (list(batches[partition]),
                    None if keys is None else list(keys[partition]), offsets)
        for partition, offsets in results.items() if not isinstance(offsets, StorageError)}
    for moves in range(MAX_MOVES + 1):
        end = services.recorded_end(timeline)
        if end is None:
            return  # still active: every event is inside it
        late: dict[int, tuple[list[bytes], list[bytes] | None]] = {}
        for partition, (payloads, partition_keys, offsets) in stored.items():
            past = [index for index, offset in enumerate(offsets) if offset > end[partition]]
            if past:
                late[partition] = ([payloads[index] for index in past],
                                   None if partition_keys is None
                                   else [partition_keys[index] for index in past])
        if not late:
            return
        if moves == MAX_MOVES:
            for partition in late:
                results[partition] = StorageError(
                    f"the timeline of '{timeline.event_type}' switched {MAX_MOVES + 1} times "
                    "while this batch was published; publish it again")
            return
        services.event_types.forget(timeline.event_type)  # read again from the database
        found = services.event_types.get(timeline.event_type)
        if found is None:
            return  # deleted meanwhile: as for any publish that races a deletion
        timeline = found[1].active
        log.warning("%d events of %s were appended past the end of a closed timeline (this "
                    "process was out of step with the switch); appending them to timeline %d",
                    sum(len(payloads) for payloads, _ in late.values()), timeline.event_type,
                    timeline.order)
        late_keys = None if keys is None else {
            partition: partition_keys for partition, (_, partition_keys) in late.items()
            if partition_keys is not None}
        moved: AppendResults
        try:
            moved = services.engines.get(timeline.storage_id).append_many(
                timeline.topic, {partition: payloads for partition, (payloads, _) in late.items()},
                late_keys)
        except StorageError as error:
            moved = dict.fromkeys(late, error)
        stored = {}
        for partition, outcome in moved.items():
            if isinstance(outcome, StorageError):
                results[partition] = outcome
            else:
                stored[partition] = (*late[partition], outcome)
