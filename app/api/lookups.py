"""What several endpoints look up first: the event type with its timelines
(404 when there is none) and the available range of its partitions; the
subscription (404) with its partitions."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from app.domain.event_type import EventType
from app.domain.subscription import Subscription
from app.domain.timeline import Timelines
from app.problems import Problem
from app.repository.event_types import event_type_with_timelines
from app.repository.subscriptions import get_subscription
from app.services import services
from app.storage.across_timelines import (
    EngineFor,
    SwitchWatch,
    timelines_bounds,
    timelines_newest_at_least,
)
from app.storage.engine import PartitionBounds, StorageError, StorageUnavailable
from app.subscriptions.known_offsets import known_newest, learn
from app.subscriptions.partitions import (
    BoundsByEventType,
    EventTypeGone,
    SubscriptionPartitions,
    subscription_partitions,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


def event_type_or_404(name: str, fresh: bool = False) -> tuple[EventType, Timelines]:
    """The event type and its timelines: from the in-process cache, or with ``fresh``
    from the database (the registry's own endpoints show a change at once, on any worker)."""
    if fresh:
        found = event_type_with_timelines(services().pool, name)
    else:
        found = services().event_types.get(name)
    if found is None:
        raise Problem(404, f"EventType '{name}' does not exist.")
    return found


def partition_bounds(timeline: Timelines) -> dict[int, PartitionBounds]:
    """The available range of every partition (positions over all timelines), read
    once so that a request sees one state."""
    bounds = _storage_answer(timeline, timelines_bounds)
    return {available.partition: available for available in bounds}


def _storage_answer(timeline: Timelines,
                    ask: Callable[[EngineFor, Timelines, SwitchWatch], T]) -> T:
    """What ``ask`` reads of the event type's storages; a failure is a 503."""
    current = services()
    try:
        return ask(current.engines.get, timeline, current.switch_watch(timeline.event_type))
    except StorageUnavailable:
        raise  # an outage: a 503 naming the storage, like every other
    except StorageError as error:
        log.error("reading the offsets of %s failed: %s", timeline.event_type, error)
        raise Problem(503, f"The storage '{timeline.active.storage_id}' did not report the "
                           f"offsets of '{timeline.event_type}'; try again later.") from None


def subscription_or_404(subscription_id: str, cached: bool = False) -> Subscription:
    """The subscription from the database, or with ``cached`` from the in-process cache
    (which hears of a deletion or change a moment after it is committed: callers
    must not act on a deleted subscription because of it)."""
    if cached:
        found = services().subscriptions.get(subscription_id)
    else:
        found = get_subscription(services().pool, subscription_id)
    if found is None:
        raise Problem(404, f"Subscription '{subscription_id}' does not exist.")
    return found


def subscription_partitions_of(subscription: Subscription) -> SubscriptionPartitions:
    """The timelines of the subscription's event types."""
    try:
        return subscription_partitions(subscription, services().event_types.get)
    except EventTypeGone as gone:
        raise Problem(422, f"the event type '{gone}' of this subscription no longer exists; "
                           "create a subscription without it") from None


def subscription_bounds(partitions: SubscriptionPartitions) -> BoundsByEventType:
    """The available range of every partition of a subscription, read once."""
    return {name: partition_bounds(timeline) for name, timeline in partitions.timelines.items()}


def newest_offset(timeline: Timelines, partition: int, position: int) -> int:
    """A position known to exist in the partition at ``position`` or past it, else its
    newest one: the storage is asked only for positions past what this process read,
    first as cheaply as it can answer (a commit on an instance that does not run the
    stream asks on every commit of a stream that follows the newest events)."""
    key = timeline.items[0].id  # positions run through all timelines of the event type
    for ask in (timelines_newest_at_least, _newest_of_bounds):
        if position <= known_newest(key, partition):
            break
        for found, newest in _storage_answer(timeline, ask).items():
            learn(key, found, newest)
    return known_newest(key, partition)


def _newest_of_bounds(engine_for: EngineFor, timelines: Timelines, watch: SwitchWatch
                      ) -> dict[int, int]:
    return {available.partition: available.newest
            for available in timelines_bounds(engine_for, timelines, watch)}
