"""Statistics of a subscription: per event type and partition, who streams it
and how far behind the committed offset is."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from app.coordination.subscription_state import SubscriptionGone, SubscriptionState
from app.domain.subscription import Subscription
from app.domain.topology import PartitionAssignment, PartitionKey, Session, Topology
from app.storage.across_timelines import EngineFor, read_after
from app.storage.engine import StorageError
from app.subscriptions.cursors import Bounds
from app.subscriptions.partitions import SubscriptionPartitions, starting_offsets

log = logging.getLogger(__name__)


def subscription_stats(subscription: Subscription, partitions: SubscriptionPartitions,
                       state: SubscriptionState, bounds: Bounds,
                       engine_for: EngineFor, show_time_lag: bool
                       ) -> list[dict[str, Any]]:
    """``SubscriptionEventTypeStats`` items, event types in the subscription's order."""
    sessions, topology = _assignments(state)
    offsets: Mapping[PartitionKey, str | None] | None = None
    if state.offsets_initialized():
        offsets = state.committed_many(partitions.partition_keys())
    elif subscription.read_from == "cursors":
        # Never streamed. The spec lets the figure be absent then only for `begin` and
        # `end`; the initial cursors tell where the first stream will start.
        offsets = starting_offsets(subscription, partitions, bounds)
    items = []
    for event_type in subscription.event_types:
        stats = []
        for partition in range(partitions.timelines[event_type].partitions):
            key = (event_type, str(partition))
            entry = _assignment(key, topology.get(key), sessions)
            if offsets is not None:
                committed = offsets[key]
                position = partitions.position(key, committed) if committed else -1
                newest = bounds[event_type][partition].newest
                entry["unconsumed_events"] = max(0, newest - position)
                if show_time_lag:
                    lag = _lag_seconds(partitions, engine_for, key, position, newest)
                    if lag is not None:
                        entry["consumer_lag_seconds"] = lag
            stats.append(entry)
        items.append({"event_type": event_type, "partitions": stats})
    return items


def subscription_status(subscription: Subscription, partitions: SubscriptionPartitions,
                        state: SubscriptionState) -> list[dict[str, Any]]:
    """``SubscriptionEventTypeStatus`` items: who streams each partition (the stats
    without offsets, which need no storage)."""
    sessions, topology = _assignments(state)
    return [{"event_type": event_type, "partitions": [
        _assignment((event_type, str(p)), topology.get((event_type, str(p))), sessions)
        for p in range(partitions.timelines[event_type].partitions)]}
        for event_type in subscription.event_types]


def _assignments(state: SubscriptionState) -> tuple[dict[str, Session], Topology]:
    try:
        return {s.id: s for s in state.sessions()}, state.topology()
    except SubscriptionGone:  # never streamed: nothing in ZooKeeper yet
        return {}, Topology(())


def _assignment(key: PartitionKey, assignment: PartitionAssignment | None,
                sessions: dict[str, Session]) -> dict[str, Any]:
    entry: dict[str, Any] = {"partition": key[1]}
    holder = sessions.get(assignment.session) if assignment and assignment.session else None
    if assignment is None or assignment.state == "unassigned" or holder is None:
        entry["state"] = "unassigned"
        return entry
    entry["state"] = assignment.state
    entry["stream_id"] = holder.id
    entry["assignment_type"] = "direct" if assignment.key in holder.requested else "auto"
    return entry


def _lag_seconds(partitions: SubscriptionPartitions, engine_for: EngineFor,
                 key: PartitionKey, position: int, newest: int) -> int | None:
    """Age of the oldest unconsumed event (0 when none is), from its ``received_at``;
    None when it cannot be told (event without metadata, storage failing)."""
    if position >= newest:
        return 0
    try:
        events = read_after(engine_for, partitions.current(key[0]), int(key[1]), position, 1)
    except StorageError as error:
        log.warning("reading the oldest unconsumed event of %s failed: %s", key, error)
        return None
    if not events:
        return 0
    try:
        received = orjson.loads(events[0].payload)["metadata"]["received_at"]
        at = datetime.fromisoformat(received.replace("Z", "+00:00"))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    return max(0, int((datetime.now(UTC) - at).total_seconds()))
