"""The partitions a subscription reads, and where reading starts in each.

A subscription's partition is a ``PartitionKey``: (event type, partition
name). Committed offsets are client offset strings, of any timeline of the
event type; reading resumes after the committed offset. Positions are those of
``app.domain.timeline``, counted through all timelines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from app.dependencies import DependencyUnavailable
from app.domain.event_type import EventType
from app.domain.subscription import Subscription
from app.domain.timeline import OffsetUnknown, Timelines
from app.domain.topology import PartitionKey, key_order
from app.storage.across_timelines import EngineFor, SwitchWatch, timelines_bounds
from app.storage.engine import PartitionBounds

Lookup = Callable[[str], tuple[EventType, Timelines] | None]
BoundsByEventType = dict[str, dict[int, PartitionBounds]]


class EventTypeGone(Exception):
    """An event type of the subscription no longer exists."""


@dataclass(frozen=True)
class SubscriptionPartitions:
    """The timelines of each event type of a subscription, as they were when it was
    looked up; ``lookup`` (the event type cache) gives newer ones after a switch."""

    timelines: Mapping[str, Timelines]
    lookup: Lookup | None = field(default=None, compare=False)

    def current(self, event_type: str) -> Timelines:
        """The newest known timelines of one of the event types."""
        if self.lookup is not None:
            try:
                found = self.lookup(event_type)
            except DependencyUnavailable:
                found = None
            if found is not None:
                return found[1]
        return self.timelines[event_type]

    def storage_ids(self) -> set[str]:
        """The storages the event types' timelines are in."""
        return {timeline.storage_id for timelines in self.timelines.values()
                for timeline in timelines.items}

    def partition_keys(self) -> list[PartitionKey]:
        return sorted(((name, str(p)) for name, timeline in self.timelines.items()
                       for p in range(timeline.partitions)), key=key_order)

    def __contains__(self, key: object) -> bool:
        if not (isinstance(key, tuple) and len(key) == 2):
            return False
        event_type, partition = key
        timeline = self.timelines.get(event_type)
        return timeline is not None and isinstance(partition, str) and partition.isdigit() \
            and str(int(partition)) == partition and int(partition) < timeline.partitions

    def client_offset(self, key: PartitionKey, position: int) -> str:
        return self.current(key[0]).encode(int(key[1]), position)

    def position(self, key: PartitionKey, committed: str) -> int:
        """The position after which the partition is read, from a stored offset."""
        try:
            return self.current(key[0]).decode(int(key[1]), committed)
        except OffsetUnknown:
            return -1


def subscription_partitions(subscription: Subscription, lookup: Lookup
                            ) -> SubscriptionPartitions:
    """The timelines of the subscription's event types, looked up with ``lookup``
    (the event type cache); ``EventTypeGone`` when one was deleted."""
    timelines = {}
    for name in subscription.event_types:
        found = lookup(name)
        if found is None:
            raise EventTypeGone(name)
        timelines[name] = found[1]
    return SubscriptionPartitions(timelines, lookup)


def starting_offsets(subscription: Subscription, partitions: SubscriptionPartitions,
                     bounds: Mapping[str, Mapping[int, PartitionBounds]]
                     ) -> dict[PartitionKey, str]:
    """The offset after which each partition is first read, from ``read_from``:
    before the oldest event (``begin``), after the newest (``end``), or the
    ``initial_cursors`` (``end`` for a partition they do not name; an expired
    cursor starts at the oldest event)."""
    initial = {(c.event_type, c.partition): c.offset for c in subscription.initial_cursors}
    offsets = {}
    for key in partitions.partition_keys():
        available = bounds[key[0]][int(key[1])]
        position = available.newest
        if subscription.read_from == "begin":
            position = available.oldest - 1
        elif subscription.read_from == "cursors" and key in initial:
            cursor = initial[key]
            position = available.oldest - 1 if cursor.lower() == "begin" else \
                max(partitions.position(key, cursor), available.oldest - 1)
        offsets[key] = partitions.client_offset(key, position)
    return offsets


def partition_bounds(partitions: SubscriptionPartitions, engine_for: EngineFor,
                     watch_of: Callable[[str], SwitchWatch],
                     known: BoundsByEventType | None = None) -> BoundsByEventType:
    """The available range of every partition, by event type (``StorageError`` when a
    storage does not answer; ``watch_of`` gives an event type's ``SwitchWatch``). Event
    types in ``known`` are not asked again, and those asked are added to it (one answer
    per event type for several subscriptions)."""
    known = {} if known is None else known
    for name in partitions.timelines:
        if name not in known:
            known[name] = {b.partition: b for b in timelines_bounds(
                engine_for, partitions.current(name), watch_of(name))}
    return {name: known[name] for name in partitions.timelines}
